"""IFEval-format instruction following: prompts with machine-checkable constraints, strict and loose accuracy.

IFEval (report §8, instruction-following benchmarks) asks for a response under verifiable constraints (a number
of words or bullets, keywords, all lowercase, JSON, an end phrase, a language, ...) and scores four numbers:
prompt-level and instruction-level accuracy, each strict and loose (loose: IFEval's relaxations, such as a
first "Sure, here it is:" line dropped). The prompts and checkers are `openafm.data.instructions` (shared with
post-training, where the checker is the reward); the prompts are drawn with seed 1000 + seed and only those of
the held-out split are kept (openafm.splits.split_of(prompt, "prompt"), the rule rl/prompts.py and synthesis
apply), so no evaluated prompt is ever trained on, whatever seeds and sizes training drew.

    prompt_strict       every constraint of the prompt followed, strictly (the headline number)
    prompt_loose        the same, loosely
    instruction_strict  the fraction of the prompt's constraints followed, strictly (averaged over prompts,
                        so it equals IFEval's instruction-level accuracy only when prompts have equal counts)
    instruction_loose   the same, loosely
"""

from __future__ import annotations

from dataclasses import dataclass

from openafm.data.instructions import Constraint, check, instruction_prompts
from openafm.eval.scoring import generate_batched
from openafm.splits import Split, first_of_split

SEED_OFFSET = 1000
MAX_TOKENS = 256


@dataclass(frozen=True)
class InstructionItem:
    id: str
    prompt: str
    constraints: tuple[Constraint, ...]
    lang: str = "en"


def instruction_items(n: int, *, seed: int) -> list[InstructionItem]:
    """The first n distinct held-out prompts of the draw with seed 1000 + seed."""
    drawn = first_of_split(lambda k: list(enumerate(instruction_prompts(k, seed=SEED_OFFSET + seed))),
                           lambda ip: ip[1].prompt, "prompt", Split.HELDOUT, n)
    return [InstructionItem(f"ifeval:{SEED_OFFSET + seed}:{i}", p.prompt, p.constraints) for i, p in drawn]


def score(item: InstructionItem, output: str) -> dict[str, float]:
    verdict = check(item.constraints, output)
    return {"prompt_strict": float(verdict.all_strict), "prompt_loose": float(verdict.all_loose),
            "instruction_strict": verdict.fraction_strict, "instruction_loose": verdict.fraction_loose}


def evaluate_instructions(model, tokenizer, items: list[InstructionItem], *, batch_size: int) -> list[dict]:
    prompts = [tokenizer.apply_chat_template([{"role": "user", "content": it.prompt}], add_generation_prompt=True)
               for it in items]
    outputs = generate_batched(model, tokenizer, prompts, max_tokens=MAX_TOKENS, batch_size=batch_size)
    records = []
    for it, prompt, out in zip(items, prompts, outputs):
        metrics = score(it, out)
        records.append({"id": it.id, "lang": it.lang, "prompt": prompt, "output": out,
                        "constraints": [c.to_dict() for c in it.constraints], "score": metrics["prompt_strict"],
                        "metrics": metrics})
    return records
