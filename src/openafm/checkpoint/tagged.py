"""openafm's own single-file safetensors formats (adapters, compressed checkpoints, exported QAT weights) name
their kind in the metadata: "format", and "format_version" where the format is versioned. Reading one checks
both before anything else, so a wrong or unreadable file raises a CheckpointError naming the file."""

from __future__ import annotations

from pathlib import Path

from safetensors import SafetensorError, safe_open

from openafm.errors import CheckpointError


def read_tagged_metadata(path: str | Path, *, fmt: str, version: int | None, what: str) -> dict[str, str]:
    """The file's metadata, after checking format == fmt (and format_version == version unless None).
    `what` names the kind of file in the error for a missing path ("adapter", "compressed checkpoint")."""
    path = Path(path)
    if not path.is_file():
        raise CheckpointError(f"{path}: no such {what} file")
    try:
        with safe_open(str(path), framework="pt") as f:
            meta = dict(f.metadata() or {})
    except (SafetensorError, OSError) as e:
        raise CheckpointError(f"{path}: cannot be read as safetensors ({e})") from None
    if meta.get("format") != fmt:
        raise CheckpointError(f"{path}: format {meta.get('format')!r} is not {fmt!r}")
    if version is not None and meta.get("format_version") != str(version):
        raise CheckpointError(f"{path}: format_version {meta.get('format_version')!r} is not supported "
                              f"(this openafm reads version {version})")
    return meta
