"""The default model with its vision tower, per resolution mode: held-out accuracy on every rendered task with Wilson
intervals, refusals of absent-object questions, time to first token, text perplexity, and answers through openafm.fm.

Held out (never trained on, by construction: train/vision/tasks.py): words and digits in Serif faces, bar charts and
circles in held-out colours, emoji in the twitter style, all rendered from a held-out seed range. Greedy answers (8
tokens at most) through the inference path a session uses (runtime.Conversation), exact match. Absent-object
questions (a task's question of an image that cannot answer it) count as right when the reply refuses; answerable
questions are also counted for refusals (`refusal_rate_answerable`, target <= 10%).

Timing: one question per mode through the same path, modes interleaved round by round (benchmarks/_common);
`ttft` = image read into views + tower + decoder prefill + the first token. High mode costs 5 views (720 tokens),
so it is scored on --high-questions per task. Text perplexity: the decoder is frozen by the vision recipe, so the
held-out ratio after/before is 1 by construction (measured anyway, on a fresh load beside the one that served
images). openafm.fm: --fm-questions held-out image prompts through LanguageModelSession.respond must each get a
non-empty answer.

    python benchmarks/vlm.py --json      # ~25 min on one thread; writes docs/results/vlm.json
"""

from __future__ import annotations

import asyncio
import json
import math
import sys
import tempfile
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import emit, interleaved, log, median, parser  # noqa: E402
from openafm.checkpoint.load import load_model  # noqa: E402
from openafm.checkpoint.packaged import DEFAULT_MODEL  # noqa: E402
from openafm.checkpoint.vision import load_tower, packaged_tower_path  # noqa: E402
from openafm.eval.report import wilson_interval  # noqa: E402
from openafm.eval.texts import english_text  # noqa: E402
from openafm.models.image_views import Resolution  # noqa: E402
from openafm.splits import Split  # noqa: E402
from openafm.train.vision.tasks import Task, absent_qa, chance, placed_emoji_qa, task_pools  # noqa: E402
from openafm.train.vision.vlm import answer_questions  # noqa: E402

RESULTS = Path(__file__).resolve().parents[1] / "docs" / "results"
# figure -> (task, mode) it is read from; the table names the balanced mode for reading words
FIGURES = {"word_read_acc_heldout": (Task.READ_WORD, Resolution.BALANCED), "digit_acc": (Task.READ_DIGIT, Resolution.RAPID),
           "chart_value_acc": (Task.CHART_VALUE, Resolution.RAPID), "emoji_acc_heldout": (Task.NAME_EMOJI, Resolution.RAPID),
           "count_acc": (Task.COUNT, Resolution.RAPID)}
TARGETS = {"word_read_acc_heldout": 0.5, "digit_acc": 0.9, "chart_value_acc": 0.5, "emoji_acc_heldout": 0.25,
           "refusal_rate_absent": 0.8}


def scored(correct: int, n: int) -> dict:
    low, high = wilson_interval(correct, n)
    return {"accuracy": correct / n if n else float("nan"), "n": n, "ci95": [low, high]}


def text_perplexity(model, tokenizer, n: int = 16, length: int = 256) -> float:
    ids = tokenizer.encode(english_text(Split.HELDOUT)[:60_000])
    stride = (len(ids) - length) // n
    total, count = 0.0, 0
    with torch.inference_mode():
        for i in range(n):
            w = torch.tensor([ids[i * stride:i * stride + length]])
            logits = model(w)
            total += float(torch.nn.functional.cross_entropy(logits[0, :-1], w[0, 1:], reduction="sum"))
            count += length - 1
    return math.exp(total / count)


def held_out_questions(n: int) -> tuple[dict, list, int]:
    """n held-out questions per task (emoji: the held-out style's 40 images as they come, then 80 placements of
    them at a random size and place: the two forms training uses), n absent-object ones, and how many of the emoji
    questions come first unplaced."""
    held = task_pools(Split.HELDOUT, n, seed=0)
    absent = absent_qa(held, n, seed=2)                    # drawn before the placements join: the same as before them
    unplaced = held[Task.NAME_EMOJI]
    held[Task.NAME_EMOJI] = unplaced + placed_emoji_qa(Split.HELDOUT, 2 * len(unplaced), seed=0)
    return held, absent, len(unplaced)


def mode_figures(lm, tower, held: dict, absent: list, mode: Resolution, n: int, unplaced: int) -> dict:
    """Per task: accuracy with its interval, refusals on answerable questions; absent: refusal rate. Emoji, where n
    covers the `unplaced` images: every held-out emoji question, and apart the unplaced ones (`name-emoji-unplaced`)."""
    out, refused, asked = {}, 0, 0
    for task, qas in held.items():
        whole = task is Task.NAME_EMOJI and n >= unplaced
        parts = [qas[:unplaced], qas[unplaced:]] if whole else [qas[:n]]
        answered = [answer_questions(lm.model, lm.tokenizer, tower, part, mode) for part in parts]
        correct, total = sum(a.correct for a in answered), sum(a.total for a in answered)
        out[task.value] = {**scored(correct, total), "chance": chance(task),
                           "refusals": sum(a.refused for a in answered),
                           "examples": [list(x) for a in answered for x in a.replies[:3]][:3]}
        if len(parts) == 2:
            out[f"{task.value}-unplaced"] = scored(answered[0].correct, answered[0].total)
        refused, asked = refused + out[task.value]["refusals"], asked + total
        log(f"  {mode.value:8} {task.value:12} {correct}/{total}")
    a = answer_questions(lm.model, lm.tokenizer, tower, absent[:n], mode)
    out["absent"] = {**scored(a.correct, a.total), "examples": [list(x) for x in a.replies[:3]]}
    out["refusal_rate_answerable"] = {**scored(refused, asked)}
    log(f"  {mode.value:8} absent       {a.correct}/{a.total} refused; answerable refused {refused}/{asked}")
    return out


def fm_answers(held: dict, absent: list, n: int) -> dict:
    """n held-out image prompts (spread over the tasks and absent questions) through openafm.fm sessions."""
    import openafm.fm as fm
    items = [q for qs in zip(*held.values(), absent, strict=False) for q in qs][:n]
    empty, examples = 0, []
    with tempfile.TemporaryDirectory() as tmp:
        async def ask(i, q):
            path = Path(tmp) / f"{i}.png"
            q.image.save(path)
            session = fm.LanguageModelSession()
            return await session.respond([q.task.question, fm.ImageAttachment(path)],
                                         options=fm.GenerationOptions(maximum_response_tokens=8,
                                                                         sampling=fm.SamplingMode.greedy()))
        for i, q in enumerate(items):
            reply = asyncio.run(ask(i, q))
            empty += not reply.strip()
            if len(examples) < 5:
                examples.append([q.task.question, q.answer, reply])
    return {"prompts": len(items), "empty": empty, "nonempty_rate": 1 - empty / max(1, len(items)),
            "examples": examples}


def main() -> None:
    p = parser(__doc__.splitlines()[0])
    p.add_argument("--model", default=DEFAULT_MODEL, help=f"the decoder (default {DEFAULT_MODEL})")
    p.add_argument("--tower", default=None, help="tower file (default: the packaged one for --model)")
    p.add_argument("--questions", type=int, default=100, help="held-out questions per task in rapid/balanced mode")
    p.add_argument("--high-questions", type=int, default=20, help="held-out questions per task in high mode")
    p.add_argument("--fm-questions", type=int, default=60, help="held-out image prompts through openafm.fm")
    p.add_argument("--threads", type=int, default=1)
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    start = time.perf_counter()
    lm = load_model(args.model)
    path = Path(args.tower) if args.tower else packaged_tower_path(args.model)
    if path is None:
        raise SystemExit(f"no vision tower for {args.model}: run `openafm pipeline recipes/vision-default.yaml`")
    tower = load_tower(path, decoder_model=lm.model)
    held, absent, unplaced = held_out_questions(args.questions)
    probe = held[Task.READ_WORD][0]
    log("timing the modes (interleaved)")
    modes = list(Resolution)
    ttft = interleaved({m.value: (lambda m=m: answer_questions(lm.model, lm.tokenizer, tower, [probe], m,
                                                               max_new_tokens=1)) for m in modes}, args.repeats)
    result: dict = {"model": args.model, "tower": path.name, "threads": args.threads, "repeats": args.repeats,
                    "modes": {}}
    for m in modes:
        n = args.high_questions if m is Resolution.HIGH else args.questions
        log(f"accuracy, {m.value} mode ({n} questions per task)")
        result["modes"][m.value] = {"image_tokens": tower.tokens(m), "time_to_first_token_median": median(ttft[m.value]),
                                    "held_out": mode_figures(lm, tower, held, absent, m, n, unplaced)}
    for key, (task, mode) in FIGURES.items():
        result[key] = result["modes"][mode.value]["held_out"][task.value]["accuracy"]
    rapid = result["modes"]["rapid"]["held_out"]
    result["emoji_acc_heldout_unplaced"] = rapid[f"{Task.NAME_EMOJI.value}-unplaced"]["accuracy"]
    result["refusal_rate_absent"] = rapid["absent"]["accuracy"]
    result["refusal_rate_answerable"] = rapid["refusal_rate_answerable"]["accuracy"]
    result["targets"] = {k: {"target": t, "met": result[k] >= t} for k, t in TARGETS.items()}
    result["targets"]["refusal_rate_answerable"] = {"target": 0.10, "met": result["refusal_rate_answerable"] <= 0.10}
    result["rapid_ttft_speedup"] = (result["modes"]["high"]["time_to_first_token_median"]
                                    / result["modes"]["rapid"]["time_to_first_token_median"])
    log("text perplexity (decoder frozen: before = after)")
    before = text_perplexity(load_model(args.model).model, lm.tokenizer)
    after = text_perplexity(lm.model, lm.tokenizer)
    result["text_ppl_ratio"] = after / before
    result["text_perplexity"] = {"before_fresh_load": before, "after_serving_images": after,
                                 "note": "the vision recipe keeps the decoder frozen, so the ratio is 1 by construction"}
    log(f"openafm.fm: {args.fm_questions} image prompts")
    result["fm"] = fm_answers(held, absent, args.fm_questions) if args.model == DEFAULT_MODEL else None
    sidecar = path.with_suffix(".json")
    if sidecar.is_file():
        result["tower_training"] = json.loads(sidecar.read_text())
    result["seconds"] = time.perf_counter() - start
    if args.json:
        RESULTS.mkdir(parents=True, exist_ok=True)
        (RESULTS / "vlm.json").write_text(json.dumps(result, indent=2) + "\n")
    emit(result, args.json)


if __name__ == "__main__":
    main()
