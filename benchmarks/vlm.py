"""The SmolLM2 + vision-tower model per resolution mode: image tokens, prefill time, time to first token, and held-out
accuracy (name the emoji in the unseen twitter style; read the word in unseen Serif faces) beside chance.

Timing: one question ("What emoji is this?" + a 64x64 emoji) through the session's inference path
(runtime.Conversation: the image read into views, the tower, the decoder prefill with the image spliced in):
`prefill` = tower + decoder prefill of the whole prompt; `ttft` = that plus the first sampled token. Modes are
interleaved round by round in one process (benchmarks/_common.interleaved); medians. Target (issue 14): rapid
mode's prefill >= 5x faster than high resolution (`rapid_prefill_speedup`).

Accuracy: greedy answers (8 tokens at most), exact match, on --questions held-out questions per task and mode.
Text perplexity: SmolLM2's held-out perplexity (Debian Reference held-out sections) with the tower attached
equals the plain model's: the decoder is frozen in stage 3, so the figure is the same number twice, measured.
The joint stage's before/after figure (a compact decoder trained jointly) comes from docs/results/vlm_joint.json
(`openafm vlm joint`), quoted here when present.

    python benchmarks/vlm.py --json      # ~5 min on one thread; writes docs/results/vlm.json
"""

from __future__ import annotations

import json
import math
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import emit, interleaved, log, median, parser  # noqa: E402
from openafm.checkpoint.load import load_model  # noqa: E402
from openafm.checkpoint.packaged import RAW_MODEL  # noqa: E402
from openafm.checkpoint.vision import load_tower, packaged_tower_path  # noqa: E402
from openafm.eval.texts import english_text  # noqa: E402
from openafm.models.image_views import Resolution  # noqa: E402
from openafm.models.vlm import image_marker, split_markers  # noqa: E402
from openafm.runtime.conversation import Conversation  # noqa: E402
from openafm.splits import Split
from openafm.splits import Split as TextSplit  # noqa: E402
from openafm.train.vision.tasks import Task, chance, emoji_qa, word_qa  # noqa: E402
from openafm.train.vision.vlm import answer_questions  # noqa: E402

RESULTS = Path(__file__).resolve().parents[1] / "docs" / "results"


def timed_question(lm, tower, qa, mode: Resolution) -> dict:
    text = lm.tokenizer.apply_chat_template([{"role": "user", "content": f"{qa.task.question}\n{image_marker(0)}"}],
                                            add_generation_prompt=True)
    before, _, after = split_markers(text)
    t0 = time.perf_counter()
    conv = Conversation(lm.model, lm.tokenizer)
    with torch.inference_mode():
        conv.append_text(before)
        conv.append_image(tower.embed_image(qa.image, mode), image_marker(0))
        conv.append_text(after)
        conv.prefill()
    prefill = time.perf_counter() - t0
    return {"prefill": prefill, "tokens": len(conv.tokens)}


def text_perplexity(model, tokenizer, n: int = 16, length: int = 256) -> float:
    ids = tokenizer.encode(english_text(TextSplit.HELDOUT)[:60_000])
    stride = (len(ids) - length) // n
    total, count = 0.0, 0
    with torch.inference_mode():
        for i in range(n):
            w = torch.tensor([ids[i * stride:i * stride + length]])
            logits = model(w)
            total += float(torch.nn.functional.cross_entropy(logits[0, :-1], w[0, 1:], reduction="sum"))
            count += length - 1
    return math.exp(total / count)


def main() -> None:
    p = parser(__doc__.splitlines()[0])
    p.add_argument("--tower", default=None, help="tower file (default: the packaged one)")
    p.add_argument("--questions", type=int, default=40, help="held-out questions per task and mode")
    p.add_argument("--high-questions", type=int, default=20, help="held-out questions per task in high mode")
    p.add_argument("--threads", type=int, default=1)
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    start = time.perf_counter()
    lm = load_model(RAW_MODEL)
    path = Path(args.tower) if args.tower else packaged_tower_path(RAW_MODEL)
    if path is None:
        raise SystemExit("no vision tower: run `make vision-weights` first")
    tower = load_tower(path, decoder=RAW_MODEL)
    sidecar = path.with_suffix(".json")
    emoji = emoji_qa(Split.HELDOUT)
    words = word_qa(Split.HELDOUT, args.questions)
    probe = emoji[0]
    log("timing the modes (interleaved)")
    modes = list(Resolution)
    times = interleaved({m.value: (lambda m=m: timed_question(lm, tower, probe, m)) for m in modes}, args.repeats)
    result: dict = {"model": RAW_MODEL, "tower": path.name, "threads": args.threads, "repeats": args.repeats,
                    "modes": {}}
    for m in modes:
        ttft = []
        for _ in range(max(1, args.repeats // 2)):
            a = answer_questions(lm.model, lm.tokenizer, tower, [probe], m, max_new_tokens=1)
            ttft += a.seconds_to_first_token
        n = args.high_questions if m is Resolution.HIGH else args.questions
        log(f"accuracy, {m.value} mode ({n} questions per task)")
        acc = {}
        for task, qas in ((Task.NAME_EMOJI, emoji[:n]), (Task.READ_WORD, words[:n])):
            a = answer_questions(lm.model, lm.tokenizer, tower, qas, m)
            acc[task.value] = {"accuracy": a.accuracy, "chance": chance(task), "n": a.total,
                               "examples": [list(x) for x in a.replies[:3]]}
        result["modes"][m.value] = {"image_tokens": tower.tokens(m),
                                    "prompt_tokens": timed_question(lm, tower, probe, m)["tokens"],
                                    "prefill_seconds_median": median(times[m.value]),
                                    "time_to_first_token_median": median(ttft), "held_out": acc}
    high, rapid = result["modes"]["high"], result["modes"]["rapid"]
    result["rapid_prefill_speedup"] = high["prefill_seconds_median"] / rapid["prefill_seconds_median"]
    result["rapid_prefill_speedup_target"] = 5.0
    result["rapid_prefill_speedup_met"] = result["rapid_prefill_speedup"] >= 5.0
    result["rapid_ttft_speedup"] = high["time_to_first_token_median"] / rapid["time_to_first_token_median"]
    log("text perplexity (decoder frozen: before = after)")
    before = text_perplexity(lm.model, lm.tokenizer)
    attached = load_model(RAW_MODEL).model       # a fresh load beside the one that served image prompts
    after = text_perplexity(lm.model, lm.tokenizer)
    result["text_perplexity"] = {"before": before, "after": after, "ratio": after / before,
                                 "fresh_load": text_perplexity(attached, lm.tokenizer),
                                 "note": "stage 3 keeps SmolLM2 frozen, so the ratio is 1 by construction"}
    joint = RESULTS / "vlm_joint.json"
    if joint.is_file():
        result["joint_stage"] = json.loads(joint.read_text())
    if sidecar.is_file():
        result["tower_training"] = json.loads(sidecar.read_text())
    result["seconds"] = time.perf_counter() - start
    if args.json:
        RESULTS.mkdir(parents=True, exist_ok=True)
        (RESULTS / "vlm.json").write_text(json.dumps(result, indent=2) + "\n")
    emit(result, args.json)


if __name__ == "__main__":
    main()
