"""Golden dumps of every preset: a change to a preset must show up as a diff of these files.

Regenerate after an intended change with: OPENAFM_UPDATE_GOLDEN=1 pytest tests/models/test_golden_configs.py
"""

import os
from pathlib import Path

import pytest

from openafm.config import dump_flat
from openafm.models.presets import PRESETS, get_preset

GOLDEN = Path(__file__).parent.parent / "golden" / "presets"


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_preset_matches_golden_dump(name):
    path = GOLDEN / f"{name}.txt"
    text = dump_flat(get_preset(name))
    if os.environ.get("OPENAFM_UPDATE_GOLDEN"):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    assert path.is_file(), f"no golden file {path}; run with OPENAFM_UPDATE_GOLDEN=1 to create it"
    assert text == path.read_text()


def test_every_golden_file_has_a_preset():
    assert sorted(p.stem for p in GOLDEN.glob("*.txt")) == sorted(PRESETS)
