"""benchmarks/vision_carry.py's non-model pieces: a stage's recorded held-out answers become counts with 95% Wilson
intervals, the reading heads are rebuilt with the tasks their checkpoint names, and the validation answers' refusals
on answerable questions exclude the absent-object ones."""

from __future__ import annotations

import json

import pytest
import torch

from bench_modules import load_benchmark
from openafm.pipelines.vision import answerable_refusal_rate, headline_rates
from openafm.train.vision.read import ReadHeads
from openafm.train.vision.tasks import Task


def test_stage_answers_turn_rates_into_counts_with_wilson_intervals(tmp_path):
    carry = load_benchmark("vision_carry")
    tower = tmp_path / "tower.safetensors"
    tower.with_suffix(".json").write_text(json.dumps({"held_out_rapid": {
        "chart-value": {"accuracy": 0.45, "n": 40}, "absent": {"refusal_rate": 0.075, "n": 40}},
        "train": {"encoder": "frozen"}, "loss_mean_last_50": 2.6, "step_seconds_sum": 500.0}))
    out = carry.stage_answers(tower)
    assert out["held_out_rapid"]["chart-value"] == {"rate": 0.45, "hits": 18, "n": 40, "ci95": [0.3071, 0.6017]}
    assert out["held_out_rapid"]["absent"]["hits"] == 3 and out["train"] == {"encoder": "frozen"}


def test_heads_come_back_with_the_tasks_their_checkpoint_names():
    carry = load_benchmark("vision_carry")
    torch.manual_seed(0)
    saved = ReadHeads(8, ((Task.COUNT, 0.5), (Task.NAME_EMOJI, 0.5)))
    heads, tasks = carry.heads_from({"heads": saved.state_dict()}, 8)
    assert [t for t, _ in tasks] == [Task.COUNT, Task.NAME_EMOJI]
    x = torch.randn(3, 8)
    torch.testing.assert_close(heads(x, Task.COUNT), saved(x, Task.COUNT))


def test_answerable_refusals_count_every_task_but_the_absent_questions():
    figures = {"read-digit": {"accuracy": 0.5, "n": 40, "refused": 2},
               "count": {"accuracy": 0.2, "n": 20, "refused": 4}, "absent": {"refusal_rate": 0.75, "n": 40}}
    assert answerable_refusal_rate(figures) == pytest.approx(6 / 60)
    assert headline_rates(figures) == {"read-digit": 0.5, "count": 0.2, "absent": 0.75}
