from collections import Counter

import pytest

from openafm.data.document import Document
from openafm.data.jsonl import write_documents
from openafm.data.pipeline.dedup import DedupStage, exact_key, normalize, shingles
from openafm.data.pipeline.executor import LocalExecutor
from openafm.data.pipeline.extract import ExtractStage
from openafm.data.pipeline.heuristics import HeuristicStage, repeated_line_fraction, symbol_ratio
from openafm.data.pipeline.langid import LangIdStage
from openafm.data.pipeline.profanity import ProfanityStage, mask
from openafm.data.pipeline.stage import Drop

HTML = """<html><head><title>T</title></head><body>
<div class="nav"><a href="/">Home</a> | <a href="/about">About</a></div>
<div class="content"><h1>Package management</h1>
<p>The Debian package management system keeps track of every file that a package installs on the system,
so that removing the package later removes exactly those files and nothing else.</p>
<p>Dependencies between packages are resolved automatically when a package is installed with apt.</p></div>
<div class="footer">Copyright 2024. All rights reserved.</div></body></html>"""


def doc(text: str, *, id: str = "t:1", domain: str = "general", lang: str | None = None, **meta) -> Document:
    return Document(id=id, text=text, source="t", licence="test", domain=domain, lang=lang, meta=dict(meta))


def test_extract_main_text():
    counts = Counter()
    out = ExtractStage().process(doc(HTML, format="html"), counts)
    assert out.meta == {"format": "text", "extracted_from": "html"}
    assert "keeps track of every file that a package installs" in out.text
    assert "resolved automatically" in out.text
    assert "<p>" not in out.text and "About" not in out.text
    assert counts["html-extracted"] == 1
    plain = doc("just text")
    assert ExtractStage().process(plain, counts) is plain and counts["not-html"] == 1
    assert ExtractStage().process(doc("<html><body></body></html>", format="html"), counts) == Drop("no-main-text")


def test_langid():
    stage, counts = LangIdStage(), Counter()
    de = stage.process(doc("Ein Mathematikprofessor trägt sein Fahrrad über den Universitätsplatz.",
                           expected_lang="en"), counts)
    assert de.lang == "de" and de.meta["lang_prob"] > 0.9
    ru = stage.process(doc("Аппетит приходит во время еды, а кушать хочется всегда."), counts)
    assert ru.lang == "ru"
    assert stage.process(doc("Calculate 965 / 5."), counts) == Drop("unknown-language")
    code = doc("def f(x):\n    return x", domain="code")
    assert stage.process(code, counts).lang is None
    assert stage.process(doc("2 + 2", domain="math", lang="en"), counts).lang == "en"
    assert counts == Counter({"lang:de": 1, "lang:ru": 1, "differs-from-source-language": 1,
                              "not-identified:code": 1, "lang-from-source": 1})


def test_dedup_exact_and_near(tmp_path):
    base = ("the quick brown fox jumps over the lazy dog while the farmer watches from the old wooden gate and "
            "the sun sets slowly behind the hills of the valley where the river runs toward the distant sea "
            "carrying leaves and small branches past the mill that has stood there for two hundred years")
    near = base.replace("two hundred", "three hundred")            # one word changed: Jaccard ~0.9
    different = ("a completely different sentence about compilers and their intermediate representations that "
                 "share no five word sequence with the other text at all, none whatsoever, which is the point here")
    docs = [doc(base, id="a"), doc(base.upper() + " !!", id="b"), doc(near, id="c"), doc(different, id="d")]
    write_documents(tmp_path / "in" / "s-00000.jsonl", docs[:2])
    write_documents(tmp_path / "in" / "s-00001.jsonl", docs[2:])      # the near copy sits in another shard
    stage, counts = DedupStage(), Counter()
    facts = stage.prepare(sorted((tmp_path / "in").glob("*.jsonl")), tmp_path / "out", LocalExecutor(False))
    assert facts["dedup"]["by_reason"] == {"exact-duplicate": 1, "near-duplicate": 1}
    assert [stage.process(d, counts) for d in docs] == [docs[0], Drop("exact-duplicate"), Drop("near-duplicate"),
                                                         docs[3]]


def test_normalize_and_shingles():
    assert normalize("Hello,  WORLD!\n\tÉtoile") == "hello world étoile"
    assert exact_key("a b") == exact_key(" A,  b. ")
    assert shingles("one two three four five six", "en") == {"one two three four five", "two three four five six"}
    assert shingles("短い文ですね。", "ja") == {"短い文です", "い文ですね"}
    assert shingles("too short", "en") == {"too short"}


@pytest.mark.parametrize("d, reason", [
    (doc("Only four words here."), "general:too-short"),
    (doc("a b c d e f g h i j"), "general:mean-word-length"),
    (doc("|||||| ###### @@@@@@ ~~~~~~ ====== ****** hello there"), "general:symbol-ratio"),
    (doc("1234 5678 9012 3456 7890 price 1111 2222 3333"), "general:alpha-words"),
    (doc("\n".join(["buy now cheap pills"] * 3 + ["a real line here"] * 2)), "general:repeated-lines"),
    (doc("x = 1\ny = 2", domain="code"), "code:too-few-lines"),
    (doc("a = 1\nb = 2\nc = 3\nd = 4\ne = '" + "z" * 1001 + "'", domain="code"), "code:max-line-length"),
    (doc("# Generated by tool.py, do not edit\na = 1\nb = 2\nc = 3\nd = 4", domain="code"), "code:autogenerated"),
    (doc("Question: What is two plus two?\nAnswer: ", domain="math"), "math:no-answer"),
])
def test_heuristics_drop(d, reason):
    assert HeuristicStage().process(d, Counter()) == Drop(reason)


@pytest.mark.parametrize("d", [
    doc("Never let your schooling interfere with your education."),
    doc("生活中的每一天都是新的开始，我们应该珍惜。", lang="zh"),
    doc("import os\n\n\ndef main():\n    \"\"\"The working directory.\"\"\"\n    path = os.getcwd()\n    return path\n", domain="code"),
    doc("Question: What is two plus two?\nAnswer: 4", domain="math"),
])
def test_heuristics_keep(d):
    assert HeuristicStage().process(d, Counter()) is d


def test_heuristic_measures():
    assert symbol_ratio("ab##") == 0.5
    assert symbol_ratio("Hello, world!") == 0.0
    assert repeated_line_fraction("a\nb\na\na") == 0.5
    assert repeated_line_fraction("a\na\na") == 0.0      # fewer than 4 lines: not judged


def test_profanity_mask_and_drop():
    assert mask("What the FUCK, he said. Holy shit.", "en") == ("What the F***, he said. Holy s***.", 2)
    assert mask("Das ist Scheiße und Fickerei.", "de") == ("Das ist S****** und F*******.", 2)
    kjv = "And Balaam rose up in the morning, and saddled his ass; the cock crew. Thou whore of Babylon, damned."
    assert mask(kjv, "en") == (kjv, 0)
    assert mask("Scheiße", "en") == ("Scheiße", 0)          # German list applies to German documents
    stage, counts = ProfanityStage(), Counter()
    long = " ".join(["word"] * 99) + " fuck"
    kept = stage.process(doc(long, lang="en"), counts)
    assert kept.text.endswith(" f***") and kept.meta["profanity_masked"] == 1
    assert stage.process(doc("fuck this shit " + "word " * 10, lang="en"), counts) == Drop("profanity-density")
    assert counts == Counter({"words-masked": 1, "documents-masked": 1})
