"""The CPU kernels' build: a version is built once per source hash, and a build killed half-way (torch's `lock`
baton left behind) does not make every later load wait forever."""

import subprocess
import sys
from pathlib import Path

import openafm.nn.packed_kernel as pk
from openafm.nn.packed_kernel import build_directory, load_kernel

LOAD = "from openafm.nn.packed_kernel import load_kernel; load_kernel(); print('loaded')"


def test_a_stale_build_baton_does_not_block_the_next_load():
    load_kernel()                                              # built (or loaded) once in this process
    directory = build_directory(Path(pk.__file__).parent / "csrc")
    (directory / "lock").touch()                               # what a killed torch build leaves behind
    done = subprocess.run([sys.executable, "-c", LOAD], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0 and "loaded" in done.stdout, done.stderr[-500:]
    assert not (directory / "lock").exists()


def test_the_build_directory_is_named_by_the_sources(tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAFM_KERNEL_CACHE", str(tmp_path / "cache"))
    csrc = Path(pk.__file__).parent / "csrc"
    copy = tmp_path / "csrc"
    copy.mkdir()
    for name in pk.SOURCES + pk.HEADERS:
        (copy / name).write_bytes((csrc / name).read_bytes())
    changed = tmp_path / "changed" / "csrc"
    changed.mkdir(parents=True)
    for name in pk.SOURCES + pk.HEADERS:
        (changed / name).write_bytes((csrc / name).read_bytes() + (b"// x\n" if name == "pool.cpp" else b""))
    assert build_directory(copy) != build_directory(changed)
    assert build_directory(copy) == build_directory(copy)
