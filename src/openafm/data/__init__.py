"""Data: corpus sources, the curation pipeline, mixtures, token shards and loaders (report §3)."""
