"""Evaluation (report §8): the `openafm eval` harness, its tasks, and the held-out text and perplexity.

    registry.py       the task registry: each task's data source, prompt format, metrics, shots, what it stands in for
    harness.py        run_eval: tasks over one model, batched, seeded, resumable, per-item JSONL + summary
    report.py         markdown tables, runs side by side, a bar chart with 95% Wilson intervals
    scoring.py        batched inference: continuation log-likelihoods (shared rows) and greedy generation
    mc.py             MMLU format (A-D, letter log-likelihood and generated letter); WordNet and reasoning-gym items
    multilingual.py   MMMLU-format items per language: Debian Reference (8 languages) and UDHR (12) sentence endings
    mgsm.py           MGSM-format math: chain of thought, the number after "The answer is", exact match
    tool_use.py       BFCL tool use: free and constrained decoding, AST accuracy
    multi_turn.py     BFCL multi-turn: user turns over the wheel's executable environments, state match
    instruction_following.py  IFEval format: verifiable constraints (data/instructions), strict and loose accuracy
    guided_quality.py  whether a valid structured output is a real answer: no empty strings, repeats, ignored counts
    bfcl_data.py      the bfcl-eval wheel's data files, BFCL docs as JSON Schema, lenient call parsing, AST match
    lm_eval_model.py  an lm-evaluation-harness model class, registered as "openafm" (imports lm_eval)
    perplexity.py     held-out perplexity of a causal LM over a token stream, in non-overlapping windows
    tasks.py          a seeded multiple-choice task set (arithmetic) scored by log-likelihood (compression tables)
    texts.py          real English text (the Debian Reference) with a fixed train / held-out split
"""
