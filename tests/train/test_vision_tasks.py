"""The rendered image tasks: what each image shows is what its answer says, held-out renderings share no font,
palette, emoji style or seed with training, and absent-object questions never ask what the image could answer."""

import random

import numpy as np
import pytest
from scipy import ndimage

from openafm.data.images.charts import HELD_OUT_PALETTES, TRAIN_PALETTES, bar_charts, render_circles, shape_counts
from openafm.data.images.emoji import HELD_OUT_STYLE, TRAIN_STYLES
from openafm.data.images.text_images import HELD_OUT_FAMILIES, TRAIN_FAMILIES, font_files
from openafm.splits import Split
from openafm.train.vision.tasks import (
    ABSENT_FROM,
    HELD_OUT_SEED,
    QA,
    Task,
    absent_qa,
    chart_qa,
    count_qa,
    digit_qa,
    is_correct,
    is_refusal,
    word_qa,
)


def test_held_out_renderings_share_no_font_palette_or_style_with_training():
    assert not {p.name for p in font_files(TRAIN_FAMILIES)} & {p.name for p in font_files(HELD_OUT_FAMILIES)}
    assert not set(TRAIN_PALETTES) & set(HELD_OUT_PALETTES)
    assert HELD_OUT_STYLE not in TRAIN_STYLES
    train = {np.asarray(q.image).tobytes() for q in digit_qa(Split.TRAIN, 30)}
    held = {np.asarray(q.image).tobytes() for q in digit_qa(Split.HELDOUT, 30)}
    assert len(held) == 30 and not train & held


def test_bar_charts_have_one_tallest_bar_and_its_value_is_the_answer():
    for chart in bar_charts(12, seed=3):
        assert 3 <= len(chart.values) <= 5 and all(1 <= v <= 9 for v in chart.values)
        assert chart.values.count(chart.tallest) == 1
        assert chart.image.size == (224, 224)
    qas = chart_qa(Split.TRAIN, 5, seed=3)
    assert [q.answer for q in qas] == [str(c.tallest) for c in bar_charts(5, seed=3)]


@pytest.mark.parametrize("count", [1, 3, 6])
def test_the_circles_drawn_are_the_count(count):
    image = render_circles(count, "tab:blue", random.Random(count))
    ink = np.asarray(image).min(axis=2) < 200                      # paper is 225-255 in every channel
    _, blobs = ndimage.label(ink)
    assert blobs == count
    assert [q.answer for q in count_qa(Split.HELDOUT, 4)] == [str(c.count) for c in
                                                              shape_counts(4, palette=HELD_OUT_PALETTES,
                                                                           seed=HELD_OUT_SEED)]


def test_absent_questions_ask_only_what_the_image_cannot_answer():
    pools = {Task.READ_WORD: word_qa(Split.TRAIN, 6), Task.COUNT: count_qa(Split.TRAIN, 6),
             Task.READ_DIGIT: digit_qa(Split.TRAIN, 6)}
    shown = {id(q.image): t for t, qs in pools.items() for q in qs}
    absent = absent_qa(pools, 60, seed=1)
    assert len(absent) == 60 and {q.task for q in absent} == {Task.NAME_EMOJI, Task.CHART_VALUE, Task.COUNT,
                                                             Task.READ_WORD, Task.READ_DIGIT}
    for q in absent:
        assert q.absent and q.answer == q.task.refusal and is_refusal(q.answer)
        assert shown[id(q.image)] in ABSENT_FROM[q.task] and shown[id(q.image)] is not q.task


def test_exact_match_ignores_case_space_and_a_full_stop_and_refusals_are_recognised():
    assert is_correct("7", " 7.") and is_correct("Apple", "apple") and not is_correct("7", "77")
    assert is_refusal("There is no word in the image.") and is_refusal("there are no circles")
    assert not is_refusal("The word is apple") and not is_refusal("")
    assert QA(Task.COUNT, None, "3").absent is False
