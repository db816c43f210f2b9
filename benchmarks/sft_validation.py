"""Validation figures for choosing post-training settings (steps, learning rates, checkpoints, data mixes) without
looking at a held-out set: tool round trips on tools no run trains on, and perplexity on text no run trains on.

    python benchmarks/sft_validation.py --json --models smollm2-135m-instruct,openafm-135m-sft,RUN/stages/sft/model

1. Tool rounds: `made_tool_cases(n, seed=0)` (data/made_tools.py), questions to the validation-only made families
   (lighthouses, campsites, ski lifts, cinemas, tiles, a route between two stops of one list): none of them is a
   made family SFT draws or a built-in one, and none is in a held-out family's domain. Each question is asked in a
   fresh fm session with 2-4 tools offered, scored as the held-out part of benchmarks/default_model.py scores its
   own (called once and right, and an answer holding every value of the result), with the same miss kinds.
2. Text perplexity: the Debian Reference's train split (no SFT, RL or reward-model pool draws it; the held-out
   figure reads the held-out split), the first --tokens tokens in 512-token windows, float weights; the ratio to the
   first model is the validation twin of the held-out `ppl_ratio_after`.
Models are anything openafm.load takes (a bundled name, or an SFT stage's merged checkpoint directory), all measured
with float weights so that a checkpoint and a bundle compare alike.
"""

from __future__ import annotations

import sys

import torch

from _common import emit, log, parser
from default_model import score_tool_cases
from openafm import fm
from openafm.checkpoint.load import load_model
from openafm.data.made_tools import made_tool_cases
from openafm.eval.perplexity import perplexity
from openafm.eval.texts import english_text
from openafm.splits import Split


def validation_figures(name: str, n: int, tokens: int) -> dict:
    lm = load_model(name)
    scored = score_tool_cases(fm.SystemLanguageModel(model=name), made_tool_cases(n, seed=0), f"validation {name}")
    ids = lm.tokenizer.encode(english_text(Split.TRAIN))[:tokens]
    return {"tool_rounds": {k: v for k, v in scored.items() if k != "rows"},
            "text_ppl": perplexity(lm.model, ids, context=512).ppl,
            "misses": [r for r in scored["rows"] if not r["success"]]}


def main() -> None:
    p = parser(__doc__)
    p.add_argument("--models", required=True, help="comma-separated models; ratios are to the first")
    p.add_argument("--n", type=int, default=60, help="validation tool questions per model")
    p.add_argument("--tokens", type=int, default=16384, help="validation text tokens for perplexity")
    p.add_argument("--threads", type=int, default=2, help="torch threads")
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    names = [m.strip() for m in args.models.split(",") if m.strip()]
    if not names:
        raise SystemExit("--models names no model")
    results = {}
    for name in names:
        log(f"== {name}")
        results[name] = validation_figures(name, args.n, args.tokens)
    first = results[names[0]]["text_ppl"]
    for r in results.values():
        r["text_ppl_ratio"] = r["text_ppl"] / first
    emit({"command": "python benchmarks/sft_validation.py " + " ".join(sys.argv[1:]),
          "split": "validation (made validation tools; Debian Reference train text)", "decoding": "greedy",
          "models": results}, args.json)


if __name__ == "__main__":
    main()
