"""Preferences and the reward model (AFM 2024 §5.1, kept in the 2025 report): graded pairs from verifiers, the
model trained on them, and its file on disk.

    pairs.py                  graded preference pairs: levels from grades, a reason each, JSONL I/O
    sources.py                the sources of graded prompt groups: math (reasoning-gym), instructions, tool-call (BFCL)
    instruction_responses.py  responses meeting all / some / none of an instruction prompt's constraints
    model.py                  the reward model: trunk + scalar head, level-aware preference loss + single-sided grading
    fit.py                    fitting it on a CPU: frozen bottom layers cached, top layers and heads trained
    saved.py                  a trained reward model on disk (trained tensors + base fingerprint) and its scorer
    training.py               `openafm reward train` / `judge`: training on graded pairs, held-out accuracy
"""
