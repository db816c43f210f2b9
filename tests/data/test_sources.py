import pytest

from openafm.data.sources import SOURCES, get_source
from openafm.data.sources.base import MissingSourceError, package_files, spread
from openafm.data.sources.fortunes import parse_strfile
from openafm.data.sources.kjv import parse_verses
from openafm.data.sources.manpages import render_man
from openafm.data.sources.reasoning_gym_math import format_problem
from openafm.data.sources.wordnet import parse_synset


def test_parse_strfile():
    text = "first one\n  indented\n%\nsecond\n%\n%\nthird  \n"
    assert parse_strfile(text) == ["first one\n  indented", "second", "third"]


def test_parse_verses_groups_chapters():
    out = "Ge1:1 In the beginning.\nGe1:2 And the earth.\nSSol1:1 The song of songs.\n1Jn5:21 Little children.\n"
    assert parse_verses(out) == [("Ge1", ["In the beginning.", "And the earth."]), ("SSol1", ["The song of songs."]),
                                 ("1Jn5", ["Little children."])]
    with pytest.raises(ValueError, match="line 1"):
        parse_verses("garbage line\n")


def test_parse_synset():
    line = "00001740 03 n 02 entity 0 big_thing 1 003 ~ 00001930 n 0000 | that which is perceived; \"an entity\"  \n"
    assert parse_synset(line) == (["entity", "big thing"], 'that which is perceived; "an entity"')


def test_spread_is_even_and_deterministic():
    assert spread(list(range(10)), 3) == [0, 3, 6]
    assert spread([1, 2], 5) == [1, 2]
    assert spread(list(range(7)), None) == list(range(7))


def test_format_problem():
    assert format_problem(" What is 2+2? ", "4", None) == "Question: What is 2+2?\nAnswer: 4"
    assert format_problem("Q", "4", "2+2=4") == "Question: Q\nAnswer: 2+2=4\nThe answer is 4."


def test_render_man_plain_text():
    text = render_man(b".TH FOO 1\n.SH NAME\nfoo \\- do \\fBthings\\fR\n")
    assert "NAME" in text and "foo - do things" in text.replace("\u2010", "-")
    assert "\x1b" not in text and "\b" not in text


def test_missing_package_names_it():
    with pytest.raises(MissingSourceError, match="no-such-corpus-pkg"):
        package_files("no-such-corpus-pkg")
    with pytest.raises(ValueError, match="unknown source 'nope'; known sources: bible-kjv-text"):
        get_source("nope")


@pytest.mark.parametrize("name", ["bible-kjv-text", "fortunes-de", "wordnet-base", "debian-reference-ja",
                                  "python-stdlib", "manpages-fr"])
def test_real_sources_yield_documents(name):
    docs = list(SOURCES[name].read(3))
    assert len(docs) == 3 and len({d.id for d in docs}) == 3
    for d in docs:
        assert d.source == name and d.text.strip() and d.licence and d.domain == SOURCES[name].domain


def test_kjv_first_chapter():
    first = next(SOURCES["bible-kjv-text"].read(None))
    assert first.id == "bible-kjv-text:Ge1" and first.meta["verses"] == 31
    assert first.text.startswith("In the beginning God created the heaven and the earth.\n")
