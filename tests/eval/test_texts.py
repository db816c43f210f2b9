import pytest

from openafm.eval.texts import DEBIAN_REFERENCE_TXT, debian_reference_sections, english_text, split_of
from openafm.splits import Split

pytestmark = pytest.mark.skipif(not DEBIAN_REFERENCE_TXT.exists(), reason="debian-reference-en not installed")


def test_sections_are_the_body_not_the_table_of_contents():
    sections = debian_reference_sections()
    assert len(sections) > 200
    assert len({h for h, _ in sections}) == len(sections)       # each heading once: the TOC was dropped
    assert all(len(b) > 0 for _, b in sections)


def test_split_is_disjoint_and_about_a_fifth():
    sections = debian_reference_sections()
    held = [h for h, _ in sections if split_of(h) is Split.HELDOUT]
    assert 0.12 < len(held) / len(sections) < 0.28
    train, heldout = english_text("train"), english_text(Split.HELDOUT)
    assert len(heldout) > 50_000 and len(train) > 3 * len(heldout)
    for h in held[:20]:
        assert h in heldout and h not in train
