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
3. Off-domain perplexity: English fortune cookies (Debian `fortunes`: quips, quotations, verse; 600 spread over the
   file, no pool draws them), the first --tokens / 2 tokens the same way. Technical prose is what the drift text is,
   and what a plain-text anchor (SFT's plain-text set: the Developer's Reference) replays; this one is not, so a
   ratio that falls on the Debian Reference by domain alone shows here as not falling.
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
from openafm.data.sources import get_source
from openafm.eval.perplexity import perplexity
from openafm.eval.texts import english_text
from openafm.splits import Split

FIGURES = {"tools", "text"}


def validation_figures(name: str, n: int, tokens: int, figures: set[str]) -> dict:
    lm = load_model(name)
    out: dict = {}
    if "tools" in figures:
        scored = score_tool_cases(fm.SystemLanguageModel(model=name), made_tool_cases(n, seed=0), f"validation {name}")
        out["tool_rounds"] = {k: v for k, v in scored.items() if k != "rows"}
        out["misses"] = [r for r in scored["rows"] if not r["success"]]
    if "text" in figures:
        ids = lm.tokenizer.encode(english_text(Split.TRAIN))[:tokens]
        quips = lm.tokenizer.encode("\n\n".join(d.text for d in get_source("fortunes").read(600)))[:tokens // 2]
        out["text_ppl"] = perplexity(lm.model, ids, context=512).ppl
        out["offdomain_ppl"] = perplexity(lm.model, quips, context=512).ppl
    return out


def main() -> None:
    p = parser(__doc__)
    p.add_argument("--models", required=True, help="comma-separated models; ratios are to the first")
    p.add_argument("--n", type=int, default=60, help="validation tool questions per model")
    p.add_argument("--tokens", type=int, default=16384, help="validation text tokens for perplexity")
    p.add_argument("--threads", type=int, default=2, help="torch threads")
    p.add_argument("--figures", default="tools,text", help="which figures: tools (round trips), text (perplexities)")
    args = p.parse_args()
    figures = {f.strip() for f in args.figures.split(",") if f.strip()}
    if not figures or figures - FIGURES:
        raise SystemExit(f"--figures {args.figures!r}: name one or more of {sorted(FIGURES)}")
    torch.set_num_threads(args.threads)
    names = [m.strip() for m in args.models.split(",") if m.strip()]
    if not names:
        raise SystemExit("--models names no model")
    results = {}
    for name in names:
        log(f"== {name}")
        results[name] = validation_figures(name, args.n, args.tokens, figures)
    first = results[names[0]]
    for r in results.values():
        for key in ("text_ppl", "offdomain_ppl"):
            if key in r:
                r[f"{key}_ratio"] = r[key] / first[key]
    emit({"command": "python benchmarks/sft_validation.py " + " ".join(sys.argv[1:]),
          "split": "validation (made validation tools; Debian Reference train text; English fortunes)",
          "decoding": "greedy",
          "models": results}, args.json)


if __name__ == "__main__":
    main()
