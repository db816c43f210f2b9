"""The spine runs one way (tests/layering.py states the rule), no two files import each other in a cycle, and each
package's __init__ says what it is and names its modules (the docs' layout page is generated from those
docstrings, so it cannot drift from the tree)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from layering import cycles, read_imports, violations

SRC = Path(__file__).resolve().parents[1] / "src"
PACKAGE = SRC / "openafm"


def test_no_module_imports_a_layer_above_it():
    found = violations(read_imports(SRC))
    assert not found, "imports that break the layering:\n" + "\n".join(found)


def test_no_import_cycle_between_files():
    found = cycles(read_imports(SRC))
    assert not found, "import cycles:\n" + "\n".join(" -> ".join(c) for c in found)


def _fake_tree(tmp_path: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        path = tmp_path / "openafm" / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    for d in [p for p in (tmp_path / "openafm").rglob("*") if p.is_dir()] + [tmp_path / "openafm"]:
        (d / "__init__.py").touch()
    return tmp_path


@pytest.mark.parametrize("rel, line, why", [
    ("nn/attention.py", "from openafm.models.plan import LayerSpec", "nn (layer 1) must not import models (layer 2)"),
    ("checkpoint/load.py", "from openafm.compress.qat import QATSpec", "the spine (checkpoint) must not import compress"),
    ("train/loop.py", "import openafm", "train must not import the front door (openafm)"),
    ("compress/qat_train.py", "from openafm.api import load", "compress must not import the front door (api)"),
    ("fm/session.py", "from openafm.serve.app import app", "fm must not import the front door (serve)"),
    ("data/loader.py", "from openafm.train.loop import Trainer", "data may import no other side package, not train"),
    ("api.py", "from openafm.cli import main", "nothing imports the entry point cli"),
    ("api.py", "from openafm.serve.app import app", "only commands import serve"),
    ("rl/rewards/registry.py", "from openafm.rl.run import RLRun", "the room rl.rewards (rank 0) must not import rl (rank 2)"),
    ("rl/run.py", "from openafm.rl.system.buffer import Sampling", "the room rl (rank 2) must not import rl.system"),
    ("rl/synthesis/rejection.py", "from openafm.rl.preference.pairs import P",
     "the room rl.synthesis (rank 1) must not import rl.preference (rank 1)"),
    ("train/loop.py", "from openafm.train.vision.clip import C", "the room train (rank 0) must not import train.vision"),
    ("fm/jsonschema/negation.py", "from openafm.fm.session import S", "the room fm.jsonschema (rank 0) must not import fm"),
])
def test_a_wrong_import_is_named_with_its_file_and_line(tmp_path, rel, line, why):
    targets = {"models/plan.py": "", "compress/qat.py": "", "api.py": "", "train/loop.py": "", "serve/app.py": "",
               "cli.py": "", "rl/run.py": "", "rl/system/buffer.py": "", "rl/preference/pairs.py": "",
               "train/vision/clip.py": "", "fm/session.py": ""}
    root = _fake_tree(tmp_path, {**targets, rel: f'"""x"""\n\n\ndef f():\n    {line}\n'})
    found = violations(read_imports(root))
    assert len(found) == 1, found
    assert found[0].startswith(f"{root / 'openafm' / rel}:5: ") and why in found[0], found[0]


def test_allowed_imports_pass(tmp_path):
    root = _fake_tree(tmp_path, {
        "models/plan.py": "from openafm.nn.layer_spec import LayerSpec\n", "nn/layer_spec.py": "",
        "compress/qat_train.py": "from openafm.train.loop import Trainer\nfrom openafm.fm.x import y\n",
        "train/loop.py": "from openafm.checkpoint.load import load_model\n", "checkpoint/load.py": "",
        "fm/x.py": "y = 1\n", "cli.py": "from openafm.commands import qat\nfrom openafm.api import load\n",
        "commands/qat.py": "from openafm.compress.qat_train import f\n", "api.py": "",
        "commands/serve.py": "from openafm.serve.app import app\n", "serve/app.py": "",
        "rl/system/buffer.py": "from openafm.rl.rollout import Row\n", "rl/rollout.py": "",
        "fm/jsonschema/negation.py": "from openafm.fm.guide import pattern_accepts\n", "fm/guide.py": ""})
    assert violations(read_imports(root)) == []


def test_a_cycle_is_found_even_through_an_import_inside_a_function(tmp_path):
    root = _fake_tree(tmp_path, {
        "models/presets.py": "from openafm.models.pt_moe import PTMoEConfig\n",
        "models/pt_moe.py": "def plan():\n    from openafm.models.presets import interleaved_plan\n",
        "models/plan.py": "from openafm.nn.x import y\n", "nn/x.py": ""})
    assert cycles(read_imports(root)) == [["openafm.models.presets", "openafm.models.pt_moe", "openafm.models.presets"]]


# --- each package says what it is ----------------------------------------------------------------------------

PACKAGES = sorted(p.parent for p in PACKAGE.rglob("__init__.py"))


@pytest.mark.parametrize("package", PACKAGES, ids=lambda p: str(p.relative_to(SRC)))
def test_each_package_docstring_lists_exactly_its_modules(package):
    doc = ast.get_docstring(ast.parse((package / "__init__.py").read_text(encoding="utf-8")))
    assert doc, f"{package}/__init__.py has no docstring saying what the package is"
    modules = {p.name for p in package.glob("*.py") if p.name != "__init__.py"}
    modules |= {f"{p.name}/" for p in package.iterdir() if (p / "__init__.py").is_file()}
    named = set(re.findall(r"(?<![\w./])([a-z_][a-z0-9_]*(?:\.py|/))(?![\w])", doc))
    assert modules <= named, f"{package}/__init__.py does not name {sorted(modules - named)}"
    assert named <= modules, f"{package}/__init__.py names {sorted(named - modules)}, which do not exist"
