"""The curation pipeline (report §3.1): 7 stages streamed shard by shard, resumable. Entry point: ``build``.

    build.py          the whole run: ingest sources -> the 7 stages -> JSONL shards per domain + a report
    inputs.py         the user's own data: JSONL, Parquet and WARC files matched by a glob -> Documents
    stage.py          Stage: a Document -> a kept Document or a Drop with a reason, counting what it did
    runner.py         run stages over JSONL shards resumably (atomic shard outputs, per-shard done-markers)
    extract.py        stage 1: HTML -> main text with trafilatura
    langid.py         stage 2: language identification with py3langid (drops "unknown")
    dedup.py          stage 3: exact deduplication (normalised-text hash) and near duplicates (MinHash LSH)
    heuristics.py     stage 4: heuristic quality rules per domain; the first failed rule is the drop reason
    quality_model.py  stage 5: a hashed n-gram logistic-regression quality filter trained on the data itself
    pii.py            stage 6: PII scrubbing (emails, phones, IP addresses, card numbers -> typed placeholders)
    profanity.py      stage 7: mask profane words; drop a document where they are more than 2% of words
"""
