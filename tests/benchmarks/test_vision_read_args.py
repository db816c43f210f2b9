"""benchmarks/vision_read.py's options: task weights name tasks at most once, each with a positive weight (else a
message naming the bad value); the validation look renders TRAIN-split images from a seed the reading phase never
draws; --evaluate refuses --weights and a missing state by name; --mode balanced trains and looks in balanced mode."""

from __future__ import annotations

import argparse
import random

import pytest

from bench_modules import load_benchmark
from openafm.models.image_views import Resolution
from openafm.splits import Split
from openafm.train.vision.read import READ_SEED, ReadConfig
from openafm.train.vision.tasks import Task

ALL = "name-emoji=0.1,read-word=0.45,read-digit=0.35,chart-value=0.05,count=0.05"


def test_weights_parse_into_the_read_config_tasks():
    read = load_benchmark("vision_read")
    tasks = dict(read.parse_weights(ALL))
    assert tasks[Task.READ_WORD] == 0.45 and tasks[Task.COUNT] == 0.05 and len(tasks) == 5
    assert read.parse_weights(None) == ReadConfig().tasks
    assert read.parse_weights("read-digit=1") == ((Task.READ_DIGIT, 1.0),)          # a one-task probe


@pytest.mark.parametrize("text, message", [
    ("read-wrd=1," + ALL.split(",", 1)[1], "'read-wrd' is not a task"),
    (ALL.replace("count=0.05", "count=0"), "count=0 must be > 0"),
    (ALL.replace("count=0.05", "count=lots"), "'count=lots' needs task=weight"),
    (ALL + ",count=1", "names a task twice"),
])
def test_bad_weights_stop_naming_the_value(text, message):
    with pytest.raises(SystemExit, match=message):
        load_benchmark("vision_read").parse_weights(text)


def test_the_validation_look_is_train_fonts_from_an_untrained_seed():
    split, seed, key = load_benchmark("vision_read").LOOKS["validation"]
    assert split is Split.TRAIN and 0 <= seed < READ_SEED and key == "validation"
    assert load_benchmark("vision_read").LOOKS["heldout"][:2] == (Split.HELDOUT, 0)


def test_evaluate_refuses_weights_and_a_missing_state(tmp_path):
    read = load_benchmark("vision_read")
    args = argparse.Namespace(weights="read-digit=1", evaluate=str(tmp_path / "read_state.pt"))
    with pytest.raises(SystemExit, match="--weights does not apply"):
        read.evaluate(args, tower=None, width=192)
    args.weights = None
    with pytest.raises(SystemExit, match="read_state.pt: no such file"):
        read.evaluate(args, tower=None, width=192)


def test_the_balanced_mode_trains_every_step_balanced_and_looks_in_it():
    modes = load_benchmark("vision_read").MODES
    mix, looked = modes["balanced"]
    rng = random.Random(0)
    assert looked is Resolution.BALANCED and {mix.sample(224, rng) for _ in range(200)} == {Resolution.BALANCED}
    assert modes["mixed"] == (ReadConfig().mix, Resolution.RAPID)              # the recipe's, as before the option
