"""MMLU-format multiple choice: the prompt format, its two scorings, and items built from real data.

The format is MMLU's (Hendrycks et al.; what report §8 and Table 3 score): a header naming the subject,
`shots` solved examples, then the question with four options lettered A-D and "Answer:".

    The following are multiple choice questions (with answers) about English vocabulary.

    Which word is defined as "a large natural stream of water"?
    A. lake
    B. river
    C. ocean
    D. puddle
    Answer: B

Each item is scored two ways:
* `acc_loglik` — the letter (" A".." D") the model finds most likely after "Answer:" (one row per item:
  the four letters share their input, eval.scoring);
* `acc_gen` — the letter read from a short greedy generation (`extract_letter`); no letter is wrong.

Items (every source seeded; the few-shot examples come from a separate dev draw, disjoint from the items):
* `wordnet_items` — "which word is defined?" from WordNet 3.0 glosses (Debian wordnet-base), three
  distractor words of the same part of speech; stands in for MMLU's knowledge questions.
* `reasoning_items` — reasoning-gym families (basic_arithmetic, chain_sum with 1-2 digit terms,
  gsm_symbolic word problems) with three numeric near-miss distractors; stands in for MMLU's
  quantitative subjects. Drawn with seed 1000 + seed, apart from the training corpus's seed 2025.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass

from openafm.data.sources.base import require_path
from openafm.data.sources.wordnet import POS, WORDNET_DIR, parse_synset
from openafm.eval.scoring import generate_batched, loglikelihoods, score_and_generate

LETTERS = "ABCD"
GEN_TOKENS = 6                  # enough for "The answer is C"
REASONING_FAMILIES = {          # family -> reasoning-gym config (small numbers: a 135M model is not at chance)
    "basic_arithmetic": dict(min_terms=2, max_terms=2, min_digits=1, max_digits=2, allow_parentheses=False,
                             operators=("+", "-", "*")),    # its division answers are wrong (1 / 8 -> 3)
    "chain_sum": dict(min_terms=2, max_terms=3, min_digits=1, max_digits=2),
    "gsm_symbolic": {},
}
RG_SEED_OFFSET = 1000           # reasoning-gym seeds used here: 1000 + seed (training data uses 2025)


@dataclass(frozen=True)
class MCQuestion:
    id: str
    subject: str
    question: str
    options: tuple[str, str, str, str]
    answer: int                 # index into options (0 = A)
    lang: str = "en"


def format_question(q: MCQuestion, *, with_answer: bool) -> str:
    lines = [q.question, *(f"{letter}. {opt}" for letter, opt in zip(LETTERS, q.options))]
    return "\n".join(lines) + (f"\nAnswer: {LETTERS[q.answer]}\n\n" if with_answer else "\nAnswer:")


def mc_prompt(q: MCQuestion, shots: list[MCQuestion]) -> str:
    header = f"The following are multiple choice questions (with answers) about {q.subject}.\n\n"
    return header + "".join(format_question(s, with_answer=True) for s in shots) + format_question(q, with_answer=False)


_LEADING = re.compile(r"^\s*[(\[]?\s*([A-D])\s*(?:[).:\]]|$|\s)")
_STATED = re.compile(r"\b(?:answer|option|choice)\s*(?:is|:)?\s*[(\[]?([A-D])\b", re.IGNORECASE)


def extract_letter(text: str) -> str | None:
    """The option letter a generated answer gives: a leading letter ("B", " (C)", "D. river", "A) ..."), else
    one stated ("The answer is C", "answer: (b)"); None when there is none."""
    m = _LEADING.match(text)
    if m:
        return m.group(1)
    m = _STATED.search(text)
    return m.group(1).upper() if m else None


def evaluate_mc(model, tokenizer, questions: list[MCQuestion], shots: list[MCQuestion], *,
                batch_size: int) -> list[dict]:
    """One record per question: prompt, the generated output, both scores and the letter log-probabilities.

    Where every letter " A".." D" is one token (every tokenizer shipped or tested here), one pass through the engine
    gives both: the prefill that scores the letters also starts the generation (scoring.score_and_generate).
    Otherwise the letters are scored as continuations and the answer generated in a second pass."""
    prompts = [mc_prompt(q, shots) for q in questions]
    letters = [tokenizer.encode(f" {L}") for L in LETTERS]
    if all(len(ids) == 1 for ids in letters):
        both = score_and_generate(model, tokenizer, prompts, [ids[0] for ids in letters], max_tokens=GEN_TOKENS,
                                  batch_size=batch_size)
        return [score_mc(q, prompt, lps, out) for q, prompt, (lps, out) in zip(questions, prompts, both)]
    scores = loglikelihoods(model, tokenizer, [(p, f" {L}") for p in prompts for L in LETTERS], batch_size=batch_size)
    outputs = generate_batched(model, tokenizer, prompts, max_tokens=GEN_TOKENS, batch_size=batch_size)
    return [score_mc(q, prompt, [s.logprob for s in scores[4 * k:4 * k + 4]], out)
            for k, (q, prompt, out) in enumerate(zip(questions, prompts, outputs))]


def score_mc(q: MCQuestion, prompt: str, letter_logprobs: list[float], output: str) -> dict:
    """The record of one question: the letter picked by log-likelihood and the one read from the output."""
    pick = max(range(4), key=letter_logprobs.__getitem__)
    letter = extract_letter(output.strip().split("\n")[0])
    return {"id": q.id, "lang": q.lang, "prompt": prompt, "output": output, "answer": LETTERS[q.answer],
            "loglik_pick": LETTERS[pick], "gen_pick": letter, "letter_logprobs": letter_logprobs,
            "score": float(pick == q.answer),
            "metrics": {"acc_loglik": float(pick == q.answer), "acc_gen": float(letter == LETTERS[q.answer])}}


# ---- items from WordNet -------------------------------------------------------------------------------

def _synsets() -> list[tuple[str, str, list[str], str]]:
    """[(pos, offset, words, definition)] of every synset with a usable definition."""
    out = []
    for pos in POS:
        path = require_path(WORDNET_DIR / f"data.{pos}", "wordnet-base")
        with open(path, encoding="utf-8") as f:
            for line in f:
                if line.startswith("  "):
                    continue
                words, gloss = parse_synset(line)
                definition = re.split(r';\s*"', gloss)[0].strip().rstrip(";").strip()
                if 15 <= len(definition) <= 150:
                    out.append((pos, line.split(" ", 1)[0], words, definition))
    return out


def wordnet_items(n: int, *, seed: int, exclude: frozenset[str] = frozenset()) -> list[MCQuestion]:
    """n "which word is defined?" questions; a word that appears in its own definition is skipped."""
    synsets = _synsets()
    by_pos: dict[str, list[int]] = {}
    for i, (pos, *_rest) in enumerate(synsets):
        by_pos.setdefault(pos, []).append(i)
    rng = random.Random(f"wordnet:{seed}")
    items: list[MCQuestion] = []
    seen: set[str] = set()
    while len(items) < n:
        pos, offset, words, definition = synsets[rng.randrange(len(synsets))]
        qid = f"wordnet:{pos}:{offset}"
        word = words[0]
        if qid in seen or qid in exclude or not re.fullmatch(r"[a-z][a-z -]*", word) \
                or word.lower() in definition.lower():
            continue
        distractors: list[str] = []
        while len(distractors) < 3:
            other = synsets[rng.choice(by_pos[pos])][2][0]
            if re.fullmatch(r"[a-z][a-z -]*", other) and other not in words and other not in distractors:
                distractors.append(other)
        options = [word, *distractors]
        rng.shuffle(options)
        seen.add(qid)
        items.append(MCQuestion(id=qid, subject="English vocabulary", question=f'Which word is defined as '
                                f'"{definition}"?', options=tuple(options), answer=options.index(word)))
    return items


# ---- items from reasoning-gym -------------------------------------------------------------------------

def near_misses(value: int, rng: random.Random) -> list[int]:
    """Three wrong answers close to value (±1, ±2, ±10, sign flip), in a seeded order."""
    pool = [value + d for d in (-10, -2, -1, 1, 2, 10)] + ([-value] if value else [])
    return rng.sample(sorted(set(pool) - {value}), 3)


def reasoning_items(n: int, *, seed: int) -> list[MCQuestion]:
    """n questions spread over REASONING_FAMILIES (integer answers only) with near-miss distractors."""
    import reasoning_gym  # on use: ~1 s to import, needed by these tasks only
    items: list[MCQuestion] = []
    families = list(REASONING_FAMILIES)
    per = [n // len(families) + (i < n % len(families)) for i in range(len(families))]
    for family, count in zip(families, per):
        if count == 0:
            continue
        rng = random.Random(f"rg-mc:{family}:{seed}")
        ds = reasoning_gym.create_dataset(family, size=4 * count + 8, seed=RG_SEED_OFFSET + seed,
                                          **REASONING_FAMILIES[family])
        taken = 0
        for i, entry in enumerate(ds):
            if taken == count:
                break
            if not re.fullmatch(r"-?\d+", str(entry["answer"]).strip()):
                continue
            value = int(entry["answer"])
            options = [value, *near_misses(value, rng)]
            rng.shuffle(options)
            items.append(MCQuestion(id=f"rg:{family}:{RG_SEED_OFFSET + seed}:{i}", subject="arithmetic",
                                    question=entry["question"].strip(), options=tuple(map(str, options)),
                                    answer=options.index(value)))
            taken += 1
    return items
