"""`openafm pipeline --help` names every stage kind a recipe may use, and each recipe it shows exists and validates."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from openafm.cli import main
from openafm.pipelines.kinds import StageKind

ROOT = Path(__file__).resolve().parents[2]


def test_help_names_every_stage_kind_and_recipes_that_validate(capsys, monkeypatch):
    with pytest.raises(SystemExit):
        main(["pipeline", "--help"])
    out = capsys.readouterr().out
    kinds = re.search(r"stage kinds: (.*) \(see", out).group(1).split(", ")
    assert kinds == [k.value for k in StageKind]
    shown = re.findall(r"openafm pipeline (recipes/\S+\.yaml)", out)
    assert sorted(shown) == sorted(f"recipes/{p.name}" for p in (ROOT / "recipes").glob("*.yaml"))
    monkeypatch.chdir(ROOT)
    for recipe in shown:
        assert main(["pipeline", "--check", recipe]) == 0
    assert all("stages OK" in line for line in capsys.readouterr().out.splitlines())
