"""MGSM-format math: grade-school word problems solved by chain of thought, the final number read after a marker.

MGSM (report §8) is GSM8K's problems in 10 languages, scored by exact match of the final number after the
model reasons step by step. Here the problems are reasoning-gym's `gsm_symbolic` (GSM8K templates with
fresh numbers; English only) and `chain_sum` (multi-term sums), drawn with seed 1000 + seed (the training
corpus uses 2025). The model is asked to end with "The answer is N."; `extract_answer` reads the number
after the last such marker (`exact_match`), and `exact_match_flex` takes the last number in the output
when no marker is there.

* 0-shot: the problem as a chat user turn with the instruction, the reply generated (the chat model's way).
* few-shot: plain text, `shots` worked examples (the dataset's own worked solutions, ending with the
  marker) then "Question: ...\\nAnswer:"; generation stops at the next "Question:".
"""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass

from openafm.eval.scoring import generate_batched

FAMILIES = ("gsm_symbolic", "chain_sum")
RG_SEED_OFFSET = 1000
MARKER = "The answer is"
INSTRUCTION = f'Solve the problem step by step. End your reply with "{MARKER} N." where N is the final number.'
MAX_TOKENS = 192
_NUMBER = r"-?\$?\s*\d[\d,]*(?:\.\d+)?"


class PromptStyle(enum.Enum):
    CHAT = "chat"           # the problem and the instruction as a chat user turn (0-shot)
    PLAIN = "plain"         # plain text: the instruction, worked examples, "Question: ...\nAnswer:"


@dataclass(frozen=True)
class MathProblem:
    id: str
    question: str
    answer: str             # the integer answer as text
    worked: str             # a worked solution ending with the marker ("" when the family has none)
    lang: str = "en"


def _number(text: str) -> str | None:
    """'$1,234.50' -> '1234.5'; '-7' -> '-7'; integers without a trailing '.0'."""
    cleaned = text.replace("$", "").replace(",", "").replace(" ", "")
    try:
        value = float(cleaned)
    except ValueError:
        return None
    return str(int(value)) if value == int(value) else str(value)


def extract_answer(text: str) -> str | None:
    """The number after the last "The answer is" (case-insensitive; "$", thousands commas, a trailing
    period and "**" markup allowed), as normalised text; None when there is no marker with a number."""
    found = re.findall(rf"{MARKER}\s*[:*]*\s*\**\s*({_NUMBER})", text, flags=re.IGNORECASE)
    return _number(found[-1]) if found else None


def extract_last_number(text: str) -> str | None:
    found = re.findall(_NUMBER, text)
    return _number(found[-1]) if found else None


def problems(family: str, n: int, *, seed: int) -> list[MathProblem]:
    if family not in FAMILIES:
        raise ValueError(f"unknown math family {family!r}; known: {', '.join(FAMILIES)}")
    import reasoning_gym  # on use: ~1 s to import, needed by these tasks only
    config = {"chain_sum": dict(min_terms=3, max_terms=4, min_digits=1, max_digits=2)}.get(family, {})
    out = []
    for i, entry in enumerate(reasoning_gym.create_dataset(family, size=n, seed=RG_SEED_OFFSET + seed, **config)):
        cot = entry.get("metadata", {}).get("answer_cot") or ""
        cot = re.sub(r"\n?####.*$", "", cot.strip()).strip()          # GSM8K's "#### N" line -> the marker
        answer = str(entry["answer"]).strip()
        worked = f"{cot}\n{MARKER} {answer}." if cot else f"{MARKER} {answer}."
        out.append(MathProblem(id=f"rg:{family}:{RG_SEED_OFFSET + seed}:{i}", question=entry["question"].strip(),
                               answer=answer, worked=worked))
    return out


def few_shot_prompt(p: MathProblem, shots: list[MathProblem]) -> str:
    examples = "".join(f"Question: {s.question}\nAnswer: {s.worked}\n\n" for s in shots)
    return f"{INSTRUCTION}\n\n{examples}Question: {p.question}\nAnswer:"


def evaluate_math(model, tokenizer, items: list[MathProblem], shots: list[MathProblem], *, batch_size: int,
                  style: PromptStyle) -> list[dict]:
    if style is PromptStyle.CHAT:
        prompts = [tokenizer.apply_chat_template([{"role": "user", "content": f"{p.question}\n\n{INSTRUCTION}"}],
                                                 add_generation_prompt=True) for p in items]
        stop: list[str] = []
    else:
        prompts = [few_shot_prompt(p, shots) for p in items]
        stop = ["\nQuestion:"]
    outputs = generate_batched(model, tokenizer, prompts, max_tokens=MAX_TOKENS, stop=stop, batch_size=batch_size)
    records = []
    for p, prompt, out in zip(items, prompts, outputs):
        strict, flex = extract_answer(out), extract_answer(out) or extract_last_number(out)
        truth = _number(p.answer)
        records.append({"id": p.id, "lang": p.lang, "prompt": prompt, "output": out, "answer": p.answer,
                        "extracted": strict, "score": float(strict == truth),
                        "metrics": {"exact_match": float(strict == truth), "exact_match_flex": float(flex == truth)}})
    return records
