"""openafm.io: the one atomic write every room uses (temporary sibling, fsync, rename)."""

import pytest

from openafm.io import atomic_write, write_text_atomic


def test_a_failed_write_leaves_the_old_file_and_no_temporary(tmp_path):
    path = write_text_atomic(tmp_path / "sub" / "report.json", "old\n")      # parents are made
    assert path.read_text() == "old\n"

    def half_then_fail(tmp):
        tmp.write_text("half")
        raise RuntimeError("killed mid-write")
    with pytest.raises(RuntimeError, match="killed mid-write"):
        atomic_write(path, half_then_fail)
    assert path.read_text() == "old\n"
    assert sorted(p.name for p in path.parent.iterdir()) == ["report.json"]


def test_the_new_content_replaces_the_old(tmp_path):
    path = write_text_atomic(tmp_path / "a.txt", "one")
    atomic_write(path, lambda tmp: tmp.write_bytes(b"two"))
    assert path.read_text() == "two"
