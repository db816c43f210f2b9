"""Evaluation: held-out perplexity, multiple-choice task scores, and the text they are measured on.

    perplexity.py  held-out perplexity of a causal LM over a token stream, in non-overlapping windows
    tasks.py       a seeded multiple-choice task set (arithmetic) scored by log-likelihood
    texts.py       real English text (the Debian Reference) with a fixed train / held-out split

    next: the `openafm eval` harness.
"""
