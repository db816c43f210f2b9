import random
from collections import Counter

from openafm.data.document import Document
from openafm.data.jsonl import write_documents
from openafm.data.pipeline.executor import LocalExecutor
from openafm.data.pipeline.quality_model import (
    QualityModelStage,
    abstract,
    corrupt,
    is_heldout,
    labelled_examples,
    windows,
)
from openafm.data.pipeline.stage import Drop
from openafm.data.sources import SOURCES


def test_windows_and_corruptions():
    assert windows("a b c d e f g h i", size=4) == [list("abcd"), list("efgh")]       # short tail dropped
    assert windows("a b c d e f g h i j", size=4) == [list("abcd"), list("efgh"), ["i", "j"]]
    assert windows("a b", size=3) == [["a", "b"]]
    assert windows("a b\nc", size=10) == [["a", "b", "\n", "c"]]
    words = ["one", "two", "\n", "three", "four", "five"]
    assert corrupt(words, "reverse-lines", random.Random(0)) == ["two", "one", "\n", "five", "four", "three"]
    shuffled = corrupt(words, "shuffle", random.Random(0))
    assert sorted(shuffled) == sorted(words) and shuffled != words
    assert abstract(["The", "Debian", "system", "has", "42", "NEW", "files."]) == \
        ["the", "Xx", "x", "has", "9", "X", "x", "."]


def test_labels_pair_every_window_with_a_permutation_of_itself():
    d = Document(id="k", text=" ".join(f"w{i}" for i in range(30)), source="s", licence="l", domain="general")
    ex = labelled_examples([d])
    assert [y for _, y in ex] == [1, 0] * 3               # 12-word windows: 12 + 12 + a 6-word tail (kept: half)
    assert all(sorted(ex[i][0]) == sorted(ex[i + 1][0]) for i in range(0, len(ex), 2))


def test_trained_on_kjv_separates_prose_from_its_permutations(tmp_path):
    docs = [d for d in SOURCES["bible-kjv-text"].read(60)]
    for d in docs:
        d.lang = "en"
    write_documents(tmp_path / "in.jsonl", docs)
    stage = QualityModelStage()
    info = stage.prepare([tmp_path / "in.jsonl"], tmp_path, LocalExecutor(False))["model"]
    assert info["heldout_accuracy"] > 0.85 and info["train_windows"] > 1000
    held = [d for d in docs if is_heldout(d.id)][0]
    text = held.text
    scrambled = " ".join(corrupt(text.split(), "shuffle", random.Random(1)))
    assert stage.model.score(text) > 0.5 > stage.model.score(scrambled)
    counts = Counter()
    assert stage.process(Document(id="z", text=scrambled, source="x", licence="l", domain="general", lang="en"),
                         counts) == Drop("low-quality-score")
    de = Document(id="y", text="ein Text", source="x", licence="l", domain="multilingual", lang="de")
    assert stage.process(de, counts) is de and counts == Counter({"scored": 1, "not-scored": 1})
    # a rerun loads the saved model instead of training again
    again = QualityModelStage()
    assert again.prepare([tmp_path / "in.jsonl"], tmp_path, LocalExecutor(False))["model"] == info
    assert again.model.score(text) == stage.model.score(text)


def test_without_curated_sources_in_the_input_it_trains_on_their_packages(tmp_path):
    """A build of the user's own files only: the positives come from the curated sources' packages, and the
    report says so."""
    write_documents(tmp_path / "in.jsonl", [Document(id="a", text="x y z", source="fortunes", licence="l",
                                                     domain="general", lang="en")])
    info = QualityModelStage().prepare([tmp_path / "in.jsonl"], tmp_path, LocalExecutor(False))["model"]
    assert info["positives_from"] == "packages" and info["heldout_accuracy"] > 0.85
