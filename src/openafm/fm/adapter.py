"""`SystemLanguageModel.Adapter`: a LoRA adapter file for the session's base model (Swift's
``SystemLanguageModel.Adapter(fileURL:)``; the Python SDK 0.2 has no adapter API, so the name follows Swift).

The file is an openafm adapter (``openafm.checkpoint.adapter``: safetensors with rank-r LoRA factors and the
fingerprint of the base weights it was trained for). It is read when the Adapter is made; a missing,
corrupt or foreign file raises `AssetsUnavailableError`, and so does attaching it to another base model.
"""

from __future__ import annotations

import json
from pathlib import Path

from openafm.checkpoint.adapter import ADAPTER_FILE, attach_adapter, read_adapter
from openafm.errors import CheckpointError
from openafm.fm.errors import AssetsUnavailableError


class Adapter:
    def __init__(self, file_url: str | Path):
        """file_url: an adapter file, or a bundle directory (`openafm adapter export`: adapter.safetensors,
        bundle.json, optionally draft/, which SystemLanguageModel then uses for speculative decoding)."""
        path, self.draft_directory = Path(file_url), None
        if path.is_dir():
            if not (path / "bundle.json").is_file():
                raise AssetsUnavailableError(f"{path}: a directory without bundle.json is not an adapter bundle")
            bundle = json.loads((path / "bundle.json").read_text())
            self.draft_directory = path / bundle["draft"] if bundle.get("draft") else None
            path = path / ADAPTER_FILE
        try:
            self._file = read_adapter(path)
        except CheckpointError as e:
            raise AssetsUnavailableError(str(e)) from e

    @property
    def file_url(self) -> Path:
        return self._file.path

    @property
    def base_model(self) -> str:
        """The name of the base model the adapter was trained for."""
        return self._file.base_name

    @property
    def creator_defined_metadata(self) -> dict:
        return {"rank": self._file.rank, "alpha": self._file.alpha, "targets": list(self._file.targets),
                "base_fingerprint": self._file.base_fingerprint}

    @property
    def key(self) -> tuple[str, str]:
        """What identifies the adapted model in the shared model cache."""
        return str(self._file.path.resolve()), self._file.base_fingerprint

    def attach(self, model):
        try:
            return attach_adapter(model, self._file)
        except CheckpointError as e:
            raise AssetsUnavailableError(str(e)) from e

    def __repr__(self) -> str:
        return f"Adapter(file_url={str(self._file.path)!r}, rank={self._file.rank}, base={self._file.base_name!r})"
