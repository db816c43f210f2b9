"""The IFEval-format task: items from the shared constraint generator, scored strict and loose by its checkers."""

from __future__ import annotations

from openafm.data.instructions import Constraint, Kind, Relation
from openafm.eval.instruction_following import InstructionItem, instruction_items, score
from openafm.eval.registry import get_task


def test_items_are_seeded_and_apart_from_post_training_prompts():
    a, b = instruction_items(5, seed=0), instruction_items(5, seed=0)
    assert [i.prompt for i in a] == [i.prompt for i in b]
    assert a[0].id.startswith("ifeval:1000:") and all(1 <= len(i.constraints) <= 3 for i in a)


def test_prompt_and_instruction_level_strict_and_loose():
    item = InstructionItem("t", "x", (Constraint(Kind.LOWERCASE), Constraint(Kind.WORDS, n=3, relation=Relation.AT_MOST)))
    assert score(item, "two words") == {"prompt_strict": 1.0, "prompt_loose": 1.0, "instruction_strict": 1.0,
                                        "instruction_loose": 1.0}
    assert score(item, "Far too many words here") == {"prompt_strict": 0.0, "prompt_loose": 0.0,
                                                       "instruction_strict": 0.0, "instruction_loose": 0.0}
    # a first line the loose variants drop: strict fails both, loose passes both
    assert score(item, "Sure! Here It Is:\nok fine") == {"prompt_strict": 0.0, "prompt_loose": 1.0,
                                                           "instruction_strict": 0.0, "instruction_loose": 1.0}
    assert score(item, "Two words") == {"prompt_strict": 0.0, "prompt_loose": 0.0, "instruction_strict": 0.5,
                                        "instruction_loose": 0.5}


def test_the_task_is_registered_with_its_metrics():
    task = get_task("ifeval")
    assert task.metrics[0] == "prompt_strict" and task.data == () and "IFEval" in task.stands_in_for
