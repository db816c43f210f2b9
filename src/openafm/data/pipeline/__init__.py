"""The curation pipeline (report §3.1): extract, language id, dedup, heuristics, a trained quality filter, PII
scrubbing and profanity masking, streamed shard by shard and resumable. Entry point: ``build``."""
