"""The curation pipeline (report §3.1): ingest + 7 stages over work shards, resumable, on one process or Ray Data.

    build.py          the whole run: ingest -> the 7 stages -> JSONL shards per domain + a report
    executor.py       where per-shard jobs and dedup's shuffle run: this process (local) or Ray Data (ray)
    ingest.py         stage 0: built-in sources and the user's files -> work shards, one job per source / file
    inputs.py         the user's own data: JSONL, Parquet and WARC files matched by a glob -> Documents
    stage.py          Stage: a Document -> a kept Document or a Drop with a reason, counting what it did
    runner.py         run stages over work shards resumably (atomic shard outputs, per-shard done-markers)
    extract.py        stage 1: HTML -> main text with trafilatura
    langid.py         stage 2: language identification with py3langid (drops "unknown")
    dedup.py          stage 3: global exact and MinHash near-duplicate removal as a shuffle over LSH buckets
    heuristics.py     stage 4: heuristic quality rules per domain; the first failed rule is the drop reason
    quality_model.py  stage 5: a hashed n-gram logistic-regression quality filter trained on the data itself
    pii.py            stage 6: PII scrubbing (emails, phones, IP addresses, card numbers -> typed placeholders)
    profanity.py      stage 7: mask profane words; drop a document where they are more than 2% of words
"""
