"""Where an answer stage's questions come from: fresh renderings never repeat an image, ask absent-object questions
at the rate given, answer only with the task's labels or its refusal, and draw the same questions from the same
random state (so a resumed run draws what the killed one would have); fixed pools draw from what they hold."""

import random

import numpy as np
import pytest

from openafm.errors import ConfigError
from openafm.train.vision.questions import FixedPools, FreshQuestions
from openafm.train.vision.tasks import QA, Task, is_refusal, labels


def _pixels(q: QA) -> bytes:
    return np.asarray(q.image).tobytes()


def test_fresh_questions_are_new_images_with_absent_ones_at_the_rate_given():
    source = FreshQuestions(absent=0.25)
    rng = random.Random(0)
    drawn = source.draw(Task.READ_DIGIT, 200, rng)
    assert len({_pixels(q) for q in drawn}) == 200
    absent = [q for q in drawn if q.absent]
    assert 0.15 < len(absent) / 200 < 0.35
    assert all(q.answer == Task.READ_DIGIT.refusal and is_refusal(q.answer) for q in absent)
    assert {q.answer for q in drawn if not q.absent} <= set(labels(Task.READ_DIGIT))
    assert all(q.task is Task.READ_DIGIT for q in drawn)
    assert source.answers(Task.READ_DIGIT) == sorted([*labels(Task.READ_DIGIT), Task.READ_DIGIT.refusal])
    assert Task.COUNT.refusal not in FreshQuestions(absent=0.0).answers(Task.COUNT)


def test_the_same_random_state_draws_the_same_questions():
    a = FreshQuestions(absent=0.5).draw(Task.COUNT, 6, random.Random(3))
    b = FreshQuestions(absent=0.5).draw(Task.COUNT, 6, random.Random(3))
    assert [(_pixels(x), x.answer) for x in a] == [(_pixels(y), y.answer) for y in b]


def test_fixed_pools_draw_only_what_they_hold():
    pool = FreshQuestions(absent=0.0).draw(Task.READ_WORD, 3, random.Random(0))
    source = FixedPools({Task.READ_WORD: pool})
    held = {_pixels(q) for q in pool}
    assert all(_pixels(q) in held for q in source.draw(Task.READ_WORD, 20, random.Random(1)))
    assert source.answers(Task.READ_WORD) == sorted({q.answer for q in pool})


@pytest.mark.parametrize("make, message", [(lambda: FreshQuestions(absent=1.0), "absent=1.0"),
                                           (lambda: FixedPools({Task.COUNT: []}), "\\['count'\\] have no questions")])
def test_bad_sources_raise_naming_the_value(make, message):
    with pytest.raises(ConfigError, match=message):
        make()
