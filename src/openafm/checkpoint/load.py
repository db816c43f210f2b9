"""One loader: a packaged name, a preset, a .gguf file or a checkpoint directory -> (model, tokenizer).

Every way a model comes from disk or from a name is a `ModelSource` in `SOURCES`: it says how it recognises
what the user passed and how it builds the model. `load_model` asks them in order (packaged names and
presets first, so a directory that happens to share a name never shadows them) and builds with the first
that answers. The trainer, compression, evaluation and the framework all load through here; `openafm.load`
(api.py) is a thin front door over it.

    loaded = load_model("smollm2-135m-instruct")      # LoadedModel(model, tokenizer, name, source)
    tok = load_tokenizer("default")                   # a tokenizer alone, by model name, .gguf or directory
"""

from __future__ import annotations

import dataclasses
import enum
from pathlib import Path
from typing import Callable

import torch

from openafm.checkpoint.block_model import load_block_model
from openafm.checkpoint.bundled import bundled_adapter, fold_adapter
from openafm.checkpoint.compressed import COMPRESSED_FILE, is_compressed_checkpoint, load_compressed
from openafm.checkpoint.families import config_from_hf
from openafm.checkpoint.family_weights import Provenance, check_fits, state_dict_from_hf
from openafm.checkpoint.gguf import load_gguf_hf, read_gguf
from openafm.checkpoint.hf import is_hf_checkpoint, load_hf
from openafm.checkpoint.native import is_native_checkpoint, load_checkpoint
from openafm.checkpoint.packaged import (
    BUNDLED,
    DEFAULT_MODEL,
    PACKAGED,
    default_gguf_path,
    gguf_tokenizer,
    packaged_sampling,
    packaged_tokenizer,
)
from openafm.checkpoint.sampling import RecommendedSampling, from_gguf_metadata, from_generation_config
from openafm.errors import CheckpointError, UnknownModelError
from openafm.models.build import ModelConfig, build_model
from openafm.models.decoder import CausalLM
from openafm.models.presets import CONFIG_ONLY, PRESETS, SMOLLM2_VOCAB, get_preset
from openafm.nn.packed_kernel import Activations
from openafm.nn.packed_linear import PackedKernel
from openafm.tokenizer.tokenizer import Tokenizer

DTYPES = {"float32": torch.float32, "fp32": torch.float32, "bfloat16": torch.bfloat16, "bf16": torch.bfloat16}


@dataclasses.dataclass
class LoadedModel:
    model: CausalLM
    tokenizer: Tokenizer | None       # None for presets whose vocabulary no packaged tokenizer covers
    name: str
    source: str                       # where it came from, in words ("GGUF /path/x.gguf", "preset (seed 0)")
    sampling: RecommendedSampling | None = None    # what its makers recommend for sampling (checkpoint/sampling.py)

    @property
    def context_window(self) -> int:
        return self.model.kv_plan.max_seq_len


@dataclasses.dataclass(frozen=True)
class LoadOptions:
    dtype: torch.dtype
    device: torch.device
    seed: int                                  # initialises presets
    packed_kernel: PackedKernel | None         # compressed checkpoints only
    weights: Weights                         # GGUF files only


class Weights(enum.Enum):
    """How a GGUF file's quantized matrices are held (the `weights=` choice)."""

    DEQUANTIZED = "dequantized"   # float32 (or the requested dtype): every matrix dequantized at load
    NATIVE = "native"             # Q8_0 / Q4_0 / Q4_1 kept as stored, multiplied with float32 activations
    NATIVE_INT8 = "native-int8"   # the same blocks, activations rounded to int8 per block (llama.cpp's scheme)
    FLOAT32 = "float32"           # an alias of DEQUANTIZED in float32
    BFLOAT16 = "bfloat16"         # dequantized, then bfloat16
    AUTO = "auto"                 # NATIVE for a GGUF source in float32 on the CPU, else as dtype= says


class SourceKind(enum.Enum):
    PACKAGED = "packaged"         # a model shipped inside an installed package (the default model)
    PRESET = "preset"             # a named config, randomly initialised from the seed
    COMPRESSED = "compressed"     # a compressed checkpoint directory (packed low-bit weights + tokenizer)
    GGUF = "gguf"                 # a .gguf file of a supported family (checkpoint/families.py)
    NATIVE = "native"             # an openafm checkpoint directory
    HF = "hf"                     # a Hugging Face directory (config.json + safetensors) of a supported family


class Placement(enum.Enum):
    CAST = "cast"                 # the built model is moved to the options' dtype and device afterwards
    OWN = "own"                   # the source places the model itself (and refuses what it cannot run)


@dataclasses.dataclass(frozen=True)
class ModelSource:
    kind: SourceKind
    recognises: Callable[[str, Path], bool]                      # (name as given, expanded path) -> is it mine?
    build: Callable[[str, Path, LoadOptions], LoadedModel]
    placement: Placement = Placement.CAST


def load_model(name_or_path: str | Path = DEFAULT_MODEL, *, dtype: torch.dtype | str = torch.float32,
               device: str | torch.device = "cpu", seed: int = 0, packed_kernel: str | None = None,
               weights: Weights | str = "dequantized") -> LoadedModel:
    """The model (in eval mode, no gradients) and tokenizer that `name_or_path` names; see SOURCES.

    weights: for a GGUF source (the packaged model included), how its quantized matrices are held:
    "dequantized" (float32 weights, or `dtype`; the default here, since training needs float weights),
    "native" (kept as stored, inference only; "native-int8" rounds the activations to int8 per block as
    llama.cpp does: faster, less exact), "float32", "bfloat16", or "auto" (native where it applies:
    the front door openafm.load defaults to it). Naming native, float32 or bfloat16 for another source,
    or beside a dtype/device it cannot run with, raises."""
    name = str(name_or_path)
    path = Path(name_or_path).expanduser()
    dtype = _dtype(dtype)
    source = next((s for s in SOURCES if s.recognises(name, path)), None)
    if packed_kernel is not None and (source is None or source.kind is not SourceKind.COMPRESSED):
        raise ValueError(f"packed_kernel={packed_kernel!r} applies to compressed checkpoint directories only; "
                         f"{name!r} is not one")
    if source is None:
        _explain_unrecognised(name, path)
    weights = _weights(weights, source.kind if source else None, dtype, torch.device(device), name)
    if weights is Weights.BFLOAT16:
        dtype = torch.bfloat16
    options = LoadOptions(dtype=dtype, device=torch.device(device), seed=seed,
                          packed_kernel=_packed_kernel(packed_kernel), weights=weights)
    loaded = source.build(name, path, options)
    if source.placement is Placement.CAST:
        loaded.model.to(device=options.device, dtype=options.dtype)
    loaded.model.eval().requires_grad_(False)
    return loaded


def available_models() -> list[str]:
    """The names load_model accepts without a path: packaged models and presets."""
    return sorted(set(PACKAGED) | set(PRESETS))


def load_tokenizer(spec: str | Path) -> Tokenizer:
    """A tokenizer alone: "default" or a packaged model name, a .gguf file, or a directory with tokenizer.json."""
    name = str(spec)
    path = Path(spec).expanduser()
    if name == "default" or name in PACKAGED:
        return packaged_tokenizer()
    if path.is_file() and path.suffix == ".gguf":
        return gguf_tokenizer(path)
    if path.is_dir() and (path / "tokenizer.json").is_file():
        return Tokenizer.from_files(path)
    raise CheckpointError(f"tokenizer {name!r}: expected 'default', a packaged model ({', '.join(sorted(PACKAGED))}), "
                          f"a .gguf file or a directory with tokenizer.json")


def build_with_weights(config: ModelConfig, state: dict[str, torch.Tensor], source: str,
                       provenance: Provenance | None = None) -> CausalLM:
    """A model with exactly these weights: missing, unexpected or misshapen tensors raise naming them (with
    `provenance`, a misshapen tensor is named with the file's tensors it was made from)."""
    model = build_model(config, device="meta")
    expected = {k: v.shape for k, v in model.state_dict().items()}
    if provenance is not None:
        check_fits(state, provenance, expected, source)
    missing, extra = sorted(set(expected) - set(state)), sorted(set(state) - set(expected))
    wrong = [f"{k}: {tuple(state[k].shape)} vs {tuple(s)}" for k, s in expected.items()
             if k in state and state[k].shape != s]
    if missing or extra or wrong:
        raise CheckpointError(f"{source}: weights do not fit the config: missing {missing[:5]}, "
                              f"unexpected {extra[:5]}, wrong shapes {wrong[:5]}")
    model.load_state_dict(state, assign=True, strict=True)
    return model


# --- the sources -------------------------------------------------------------------------------------------

def _build_packaged(name: str, path: Path, options: LoadOptions) -> LoadedModel:
    gguf = default_gguf_path()
    loaded = _build_gguf(name, gguf, options)
    loaded.sampling = packaged_sampling(name)
    if name in BUNDLED:
        adapter = bundled_adapter(BUNDLED[name], gguf)
        folded = fold_adapter(loaded.model, adapter)
        loaded.source += f" + adapter {adapter.path.name} (rank {adapter.rank}, folded into {folded} layers)"
    return loaded


def _build_preset(name: str, path: Path, options: LoadOptions) -> LoadedModel:
    if name in CONFIG_ONLY:
        raise ValueError(f"preset {name!r} is a report-scale config only ({get_preset(name).param_count() / 1e9:.2f}B "
                         f"parameters); inspect it with `openafm models --describe {name}`")
    torch.manual_seed(options.seed)
    model = build_model(get_preset(name))
    tokenizer = packaged_tokenizer() if model.kv_plan.vocab_size == SMOLLM2_VOCAB else None
    return LoadedModel(model, tokenizer, name=name, source=f"preset (random init, seed {options.seed})")


def _build_compressed(name: str, path: Path, options: LoadOptions) -> LoadedModel:
    if options.dtype != torch.float32 or options.device.type != "cpu":
        raise ValueError(f"{path} is a compressed checkpoint: it runs from packed weights in float32 on the CPU, "
                         f"not dtype={options.dtype} device={options.device}")
    model = load_compressed(path / COMPRESSED_FILE, kernel=options.packed_kernel or PackedKernel.CPU)
    return LoadedModel(model, _directory_tokenizer(path), name=path.name, source=f"compressed checkpoint {path}")


def _build_gguf(name: str, path: Path, options: LoadOptions) -> LoadedModel:
    metadata = read_gguf(path).metadata     # read once for the tokenizer and the sampling recommendation, which are
    if options.weights in (Weights.NATIVE, Weights.NATIVE_INT8):     # built after the model (its errors come first)
        activations = Activations.INT8 if options.weights is Weights.NATIVE_INT8 else Activations.FLOAT32
        model, types = load_block_model(path, activations)
        source = f"GGUF {path} (native weights: {types}; {activations.value} activations)"
    else:
        hf_sd, hf_config, _ = load_gguf_hf(path)
        config = config_from_hf(hf_config, str(path))
        state, provenance = state_dict_from_hf(hf_sd, config, str(path))
        model, source = build_with_weights(config, state, str(path), provenance), f"GGUF {path}"
    return LoadedModel(model, Tokenizer.from_gguf_metadata(metadata), name=path.stem if name not in PACKAGED else name,
                       source=source, sampling=from_gguf_metadata(metadata, path))


def _build_native(name: str, path: Path, options: LoadOptions) -> LoadedModel:
    config, state, _ = load_checkpoint(path)
    return LoadedModel(build_with_weights(config, state, str(path)), _directory_tokenizer(path), name=path.name,
                       source=f"openafm checkpoint {path}", sampling=from_generation_config(path))


def _build_hf(name: str, path: Path, options: LoadOptions) -> LoadedModel:
    config, state = load_hf(path)
    return LoadedModel(build_with_weights(config, state, str(path)), _directory_tokenizer(path), name=path.name,
                       source=f"Hugging Face checkpoint {path}", sampling=from_generation_config(path))


SOURCES: tuple[ModelSource, ...] = (
    ModelSource(SourceKind.PACKAGED, lambda name, path: name in PACKAGED, _build_packaged),
    ModelSource(SourceKind.PRESET, lambda name, path: name in PRESETS, _build_preset),
    ModelSource(SourceKind.COMPRESSED, lambda name, path: is_compressed_checkpoint(path), _build_compressed,
                placement=Placement.OWN),
    ModelSource(SourceKind.GGUF, lambda name, path: path.is_file() and path.suffix == ".gguf", _build_gguf),
    ModelSource(SourceKind.NATIVE, lambda name, path: path.is_dir() and is_native_checkpoint(path), _build_native),
    ModelSource(SourceKind.HF, lambda name, path: path.is_dir() and is_hf_checkpoint(path), _build_hf),
)


def _explain_unrecognised(name: str, path: Path):
    """No source took it: say why, naming the path or listing the names that would have worked."""
    if path.is_file():
        raise CheckpointError(f"{path}: not a checkpoint (expected a .gguf file or a checkpoint directory)")
    if path.is_dir():
        raise CheckpointError(f"{path}: not a checkpoint directory (no openafm or Hugging Face config.json "
                              f"with safetensors weights)")
    raise UnknownModelError(name, available_models())


def _directory_tokenizer(path: Path) -> Tokenizer | None:
    return Tokenizer.from_files(path) if (path / "tokenizer.json").is_file() else None


def _dtype(dtype: torch.dtype | str) -> torch.dtype:
    if isinstance(dtype, torch.dtype):
        return dtype
    if dtype not in DTYPES:
        raise ValueError(f"dtype {dtype!r} is not supported; use one of {sorted(DTYPES)}")
    return DTYPES[dtype]


def _packed_kernel(value: str | None) -> PackedKernel | None:
    if value is None:
        return None
    kinds = [k.value for k in PackedKernel]
    if value not in kinds:
        raise ValueError(f"packed_kernel={value!r}; accepted: {kinds}")
    return PackedKernel(value)


def parse_weights(value: Weights | str) -> Weights:
    """A `weights=` value as a Weights; anything else raises naming it and the choices."""
    try:
        return Weights(value)
    except ValueError:
        raise ValueError(f"weights={value!r} is not a weights choice; use one of "
                         f"{[w.value for w in Weights]}") from None


def _weights(value: Weights | str, kind: SourceKind | None, dtype: torch.dtype, device: torch.device,
             name: str) -> Weights:
    """The weights choice resolved for this source: AUTO becomes NATIVE or DEQUANTIZED; a choice that
    cannot apply raises."""
    weights = parse_weights(value)
    gguf = kind in (SourceKind.GGUF, SourceKind.PACKAGED)
    runs_native = gguf and dtype == torch.float32 and device.type == "cpu"
    if weights is Weights.AUTO:
        return Weights.NATIVE if runs_native else Weights.DEQUANTIZED
    if weights is Weights.FLOAT32:
        weights = Weights.DEQUANTIZED
        if dtype != torch.float32:
            raise ValueError(f"weights='float32' contradicts dtype={dtype}")
    if weights in (Weights.NATIVE, Weights.NATIVE_INT8, Weights.BFLOAT16) and not gguf:
        raise ValueError(f"weights={weights.value!r} applies to GGUF files and packaged models; {name!r} is not one "
                         f"(use weights='auto' or leave it out)")
    if weights in (Weights.NATIVE, Weights.NATIVE_INT8) and not runs_native:
        raise ValueError(f"weights={weights.value!r} runs float32 on the CPU; got dtype={dtype}, device={device} "
                         f"(use weights='float32' or 'bfloat16' for other dtypes and devices)")
    if weights is Weights.BFLOAT16 and dtype not in (torch.float32, torch.bfloat16):
        raise ValueError(f"weights='bfloat16' contradicts dtype={dtype}")
    return weights
