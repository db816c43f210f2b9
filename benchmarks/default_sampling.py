"""What a user gets from a model when a request leaves sampling unset: the candidate defaults side by side on the same
prompts, so that a model's recommended sampling (the one `openafm serve` applies to a request without `temperature` or
`top_p`) is chosen on data, and the choice is checked on held-out prompts.

    python benchmarks/default_sampling.py --json --look validation     # choose here (training-split prompts)
    python benchmarks/default_sampling.py --json --look heldout        # then report here

Each variant answers every prompt twice (seeds 0 and 1; greedy once, its answer is the same):
    instructions  verifiable-instruction prompts (1-2 constraints): the share of answers where every constraint
                  holds (strict), as IFEval's prompt-level strict
    language      UDHR questions asked to be answered in a given language: the share answered in it (py3langid)
    distinct      the share of prompts whose two sampled answers differ (what sampling is for: n > 1, retries)
    nll           the answers' mean negative log-likelihood per token under the model itself (temperature 1): how
                  surprising the text is to the model; word salad is high, greedy text and loops are low
    looping       the share of answers in which one word 4-gram occurs three times or more (a repetition loop)

Variants: greedy (the reference, never a default for sampled requests), openai (temperature 1, no cut: OpenAI's API
default, what a request without sampling fields got before), card (0.2 / top-p 0.9: the SmolLM2 model card's usage
example), warm (0.7 / top-p 0.9: the demo's), llama (0.8 / top-k 40 / top-p 0.95 / min-p 0.05: llama.cpp's defaults).
The validation look draws training-split prompts (instructions from seed 7, the UDHR answer-in prompts of the train
articles); the held-out look draws the held-out split of both, never trained on (tests/test_heldout_disjoint.py).
Writes docs/results/default_sampling.json (key = the look) with --json; every rate has n and a 95% Wilson interval.

The choice (`chosen`, written before the first full run): among the sampled variants, the most instructions + language
hits on validation, and within 4 hits of the best the one that loops least; it becomes the bundle's recommendation
unless its held-out hits fall below openai's. `--sidecar` applies that rule to the two looks on file and writes the
result into the bundle's sidecar ("sampling"), which checkpoint/packaged.py reads:

    python benchmarks/default_sampling.py --sidecar                     # after both looks
"""

from __future__ import annotations

import json
import sys
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import emit, log, parser  # noqa: E402
from default_model import rate  # noqa: E402
import openafm  # noqa: E402
from openafm.checkpoint.packaged import BUNDLED  # noqa: E402
from openafm.data.pipeline.langid import identify  # noqa: E402
from openafm.io import write_text_atomic  # noqa: E402
from openafm.rl.multilingual_prompts import Kind as UDHRKind  # noqa: E402
from openafm.rl.multilingual_prompts import udhr_prompts  # noqa: E402
from openafm.rl.prompts import build_prompts  # noqa: E402
from openafm.rl.rewards.registry import make_reward  # noqa: E402
from openafm.runtime.engine import Engine, EngineConfig, RowRequest  # noqa: E402
from openafm.runtime.request import Completion  # noqa: E402
from openafm.runtime.sampling import SamplingParams  # noqa: E402
from openafm.splits import Split  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "docs" / "results" / "default_sampling.json"
VARIANTS = {"greedy": {}, "openai": {"temperature": 1.0}, "card": {"temperature": 0.2, "top_p": 0.9},
            "warm": {"temperature": 0.7, "top_p": 0.9},
            "llama": {"temperature": 0.8, "top_k": 40, "top_p": 0.95, "min_p": 0.05}}
SEEDS = (0, 1)
LOOKS = {"validation": (Split.TRAIN, 7), "heldout": (Split.HELDOUT, 0)}


def prompts(look: str, n: int) -> dict[str, list[tuple[str, object]]]:
    """-> {"instructions": [(prompt, constraints)], "language": [(prompt, language code)]}, n of each."""
    split, seed = LOOKS[look]
    ins = build_prompts("instructions", {"most": 2}, split, size=n, seed=seed)
    udhr = udhr_prompts(split, kinds=[UDHRKind.ANSWER_IN])[:n]
    return {"instructions": [(r.prompt, r.target) for r in ins], "language": [(r.prompt, r.lang) for r in udhr]}


def answers(engine: Engine, lm, items: list[tuple[str, object]], sampling: SamplingParams, max_tokens: int,
            logprobs: list[float] | None = None) -> list[str]:
    """Each prompt as one user turn of the chat template, through the engine in one batch -> the answer texts (and
    every chosen token's log-probability under the model, appended to `logprobs`)."""
    def collect(event) -> None:
        if logprobs is not None and event.logprob is not None and event.token_id >= 0:
            logprobs.append(event.logprob)
    outs = [Completion(on_event=collect) for _ in items]
    engine.run([RowRequest(lm.encode(lm.chat_prompt(p)), max_tokens, out, sampling=sampling, logprobs=0)
                for (p, _), out in zip(items, outs, strict=True)])
    return [o.text for o in outs]


def loops(text: str) -> bool:
    """Whether one word 4-gram occurs three times or more."""
    words = text.lower().split()
    grams = Counter(zip(words, words[1:], words[2:], words[3:]))
    return bool(grams) and max(grams.values()) >= 3


def measure(engine: Engine, lm, sets: dict, settings: dict) -> dict:
    """One variant on both prompt sets -> its rates and one example answer per set."""
    strict = make_reward("instructions", level="strict", aggregate="all")
    seeds = SEEDS if settings else (None,)
    runs = {name: [] for name in sets}
    logprobs: list[float] = []
    for seed in seeds:
        sampling = SamplingParams(**settings, seed=seed)
        runs["instructions"].append(answers(engine, lm, sets["instructions"], sampling, 160, logprobs))
        runs["language"].append(answers(engine, lm, sets["language"], sampling, 96, logprobs))
    ok_ins = [strict(p, a, c) == 1.0 for run in runs["instructions"] for (p, c), a in zip(sets["instructions"], run)]
    ok_lang = [identify(a)[0] == lang for run in runs["language"] for (_, lang), a in zip(sets["language"], run)]
    out = {"settings": settings or {"temperature": 0}, "instructions": rate(sum(ok_ins), len(ok_ins)),
           "language": rate(sum(ok_lang), len(ok_lang)), "nll": round(-sum(logprobs) / len(logprobs), 3),
           "looping": rate(sum(loops(a) for name in sets for run in runs[name] for a in run),
                           sum(len(run) for name in sets for run in runs[name])),
           "example": {name: {"prompt": sets[name][0][0], "answer": runs[name][0][0]} for name in sets}}
    if len(seeds) == 2:
        pairs = [a != b for name in sets for a, b in zip(*runs[name])]
        out["distinct"] = rate(sum(pairs), len(pairs))
    return out


def chosen(validation: dict) -> str:
    """The rule, on the validation look's variants -> the chosen variant's name."""
    sampled = {k: v for k, v in validation["variants"].items() if k != "greedy"}
    hits = {k: v["instructions"]["hits"] + v["language"]["hits"] for k, v in sampled.items()}
    near = [k for k in sampled if hits[k] >= max(hits.values()) - 4]
    return min(near, key=lambda k: (sampled[k]["looping"]["rate"], -hits[k]))


def write_sidecar(model: str) -> dict:
    """The rule on both looks on file -> the bundle's sidecar "sampling" (raises where the held-out check fails)."""
    on_file = json.loads(RESULTS.read_text())
    looks = {look: on_file[look] for look in LOOKS}
    if any(r["model"] != model for r in looks.values()):
        raise SystemExit(f"--sidecar: the looks on file are of {[r['model'] for r in looks.values()]}, not {model}")
    name = chosen(looks["validation"])
    held = looks["heldout"]["variants"]
    score = {k: held[k]["instructions"]["hits"] + held[k]["language"]["hits"] for k in (name, "openai")}
    if score[name] < score["openai"]:
        raise SystemExit(f"--sidecar: {name} has {score[name]} held-out hits against openai's {score['openai']}: "
                         f"the rule keeps OpenAI's defaults")
    entry = {"settings": VARIANTS[name], "chosen": f"benchmarks/default_sampling.py: {name}, the best of "
             f"{len(looks['validation']['variants']) - 1} sampled settings on validation prompts",
             **{look: {k: looks[look]["variants"][name][k] for k in ("instructions", "language", "looping")}
                for look in LOOKS}}
    path = BUNDLED[model].sidecar_path
    meta = json.loads(path.read_text())
    meta["sampling"] = entry
    write_text_atomic(path, json.dumps(meta, indent=1) + "\n")
    return entry


def main() -> None:
    p = parser(__doc__)
    p.add_argument("--look", choices=sorted(LOOKS), default="validation", help="which prompts (choose on validation)")
    p.add_argument("--model", default="openafm-135m", help="the model whose defaults are chosen (default openafm-135m)")
    p.add_argument("--n", type=int, default=60, help="prompts per set (default 60)")
    p.add_argument("--variants", default=",".join(VARIANTS), help=f"which of {', '.join(VARIANTS)}")
    p.add_argument("--sidecar", action="store_true", help="write the chosen sampling into the bundle's sidecar (the "
                   "rule above, on both looks on file) and stop")
    args = p.parse_args()
    if args.sidecar:
        if args.model not in BUNDLED:
            raise SystemExit(f"--sidecar: {args.model!r} is not a bundled model ({', '.join(BUNDLED)})")
        emit(write_sidecar(args.model), args.json)
        return
    names = args.variants.split(",")
    unknown = [v for v in names if v not in VARIANTS]
    if unknown or args.n < 1:
        raise SystemExit(f"--variants {unknown} unknown (known: {', '.join(VARIANTS)}); --n {args.n} must be >= 1")
    t0 = time.perf_counter()
    lm = openafm.load(args.model)
    sets = prompts(args.look, args.n)
    engine = Engine(lm.model, lm.tokenizer, EngineConfig(max_batch=8, prefix_cache=0))
    answers(engine, lm, sets["language"][:8], SamplingParams(), 8)                       # warm-up, for every variant
    variants = {}
    for name in names:
        log(f"{name}: {VARIANTS[name] or 'greedy'}")
        variants[name] = measure(engine, lm, sets, VARIANTS[name])
    result = {"model": args.model, "look": args.look, "split": LOOKS[args.look][0].value, "n_prompts": args.n,
              **({"chosen": chosen({"variants": variants})}
                 if args.look == "validation" and set(variants) - {"greedy"} else {}),
              "seeds": list(SEEDS), "variants": variants, "seconds": round(time.perf_counter() - t0),
              "command": f"python benchmarks/default_sampling.py --json --look {args.look}"}
    if args.json:
        on_file = json.loads(RESULTS.read_text()) if RESULTS.is_file() else {}
        on_file[args.look] = result
        RESULTS.write_text(json.dumps(on_file, indent=1) + "\n")
    emit(result, args.json)


if __name__ == "__main__":
    main()
