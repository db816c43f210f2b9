"""`openafm tokenizer train` then `openafm tokenizer extend` on the trained directory: files load back,
extension.json agrees with the tokenizer, old ids keep their strings."""

from __future__ import annotations

import json

from openafm.cli import main
from openafm.tokenizer import Tokenizer
from openafm.tokenizer.extend import EXTENSION_FILE, VocabExtension


def test_train_then_extend(tmp_path, capsys):
    english = tmp_path / "en.txt"
    english.write_text("the cat sat on the mat.\nthe other cat.\n\nthe theory of the theatre.\n" * 5, encoding="utf-8")
    greek = tmp_path / "el.txt"
    greek.write_text("Όλοι οι άνθρωποι γεννιούνται ελεύθεροι.\n\nΚάθε άτομο έχει δικαίωμα στη ζωή.\n" * 3,
                     encoding="utf-8")
    assert main(["tokenizer", "train", "--text", str(english), "--vocab-size", "280", "--min-frequency", "1",
                 "--out", str(tmp_path / "base")]) == 0
    base = Tokenizer.from_files(tmp_path / "base")
    assert base.vocab_size == 280 and base.eos_token == "<|endoftext|>"
    assert main(["tokenizer", "extend", str(tmp_path / "base"), "--text", str(greek), "--add", "12",
                 "--out", str(tmp_path / "ext")]) == 0
    assert "280 + 12 tokens = 292" in capsys.readouterr().out
    new = Tokenizer.from_files(tmp_path / "ext")
    ext = VocabExtension.from_json(new, json.loads((tmp_path / "ext" / EXTENSION_FILE).read_text()))
    assert all(new.id_to_token(i) == base.id_to_token(i) for i in range(280))
    text = "Κάθε άτομο έχει δικαίωμα στη ζωή και την ελευθερία."
    assert [j for i in new.encode(text) for j in ext.decompose(i)] == base.encode(text)
    assert len(new.encode(text)) < len(base.encode(text))
    assert main(["tokenizer", "extend", str(tmp_path / "base"), "--add", "3", "--out", str(tmp_path / "x")]) == 2
