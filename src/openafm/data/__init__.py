"""Data: corpus sources, the curation pipeline, mixtures, token shards and loaders (report §3).

    sources/            corpus readers, each yielding Documents with their origin and licence
    pipeline/           the curation pipeline: extract, language id, dedup, heuristics, quality model, PII, profanity
    images/             image-text pairs from packages (emoji styles, icons, digits) for the vision encoder
    document.py         Document: the unit every data stage passes along, with where it came from
    jsonl.py            JSON Lines I/O between pipeline stages (a bad line is an error naming file and line)
    tokenize_shards.py  JSONL documents -> token shards, one group of shards per domain and language
    shards.py           token shards: tokenized documents as memory-mapped arrays, written atomically
    mixture.py          the pretraining mixture: domain weights, temperature sampling of languages, a curriculum
    loader.py           PackedLoader: a deterministic, resumable loader of packed rows over shards and a mixture
    batch.py            Batch: one training batch of packed rows (what the loader yields, the trainer consumes)
    chat.py             ChatExample (a user turn and the assistant turn to learn) and JSONL files of them
    conversations.py    the adapter toolkit's JSONL: one conversation of turns per line, tool-call extension
    guided.py           guided-generation SFT data: seeded @generable types, valid short instances, prompts
    guided_vocab.py     the word tables, fields and concepts the guided-generation data is built from
    instructions.py     verifiable instruction-following constraints (IFEval-style): seeded prompts, strict and loose
                        checkers
    tool_rounds.py      tool round-trip SFT data: seeded conversations that call the right tool and answer from its
                        result, no-call and follow-up turns, held-out benchmark cases
    tool_rounds_vocab.py  the tool families, tables and templates the tool round-trip data is built from
    made_tools.py       made-up tool families (invented lookups and formulas, none in a held-out domain) for
                        tool round-trip SFT data, and validation-only ones for choosing settings
    made_tools_vocab.py the domains, formulas and value makers the made-up tools are drawn from
    passages.py         plain-text passages a fine-tune replays with a loss on every token (its text anchor)
"""
