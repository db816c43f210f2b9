"""A decode step as one C++ call: the kernels of nn/csrc run every layer of a dense decoder for one
new token per row, with no per-operator dispatch (csrc/decode_step.cpp).

The eager step (models/decoder.py's modules, one PyTorch operator at a time) costs ~6 ms of dispatch per
token for a 30-layer model whatever its width (measured: tiny widths, 1 thread), more than llama.cpp's
whole step for SmolLM2. The fused step reads the same module tree — the same weights, in whatever form
each layer holds them (float32, packed 2/4/8-bit, GGUF blocks; LoRA factors beside any of them) — and the
same KVCache buffers, so there is no second model to drift: tests compare its logits and greedy tokens
with the eager step on every supported family.

What it does not run (the eager step does, and `why_not_fused` says which applies): PT-MoE tracks and
MoE layers, dtypes other than float32, devices other than the CPU, packed layers set to
PackedKernel.TORCH, and forwards of more than one token per row (prefill, fast-forwarded tokens) except
`verify` (the few tokens of one sequence that speculative decoding scores in one pass), `rows` (T tokens of
each row of a batch, padding included), `ragged` (any number of tokens per row, padding skipped, logits of the
chosen slots only: the engine's speculative step, whose rows guess unequal numbers of tokens) and `prefill` (a
short prompt chunk of one sequence, the head run on its last token only).
"""

from __future__ import annotations

import enum
import threading
import weakref

import torch
from torch import nn

from openafm.models.decoder import Decoder
from openafm.models.plan import AttentionKind, Features, FFNKind
from openafm.nn.block_linear import BlockEmbedding, BlockLinear, BlockRows
from openafm.nn.lora import LoRALinear
from openafm.nn.packed_kernel import KernelUnavailableError, WeightFormat, check_cpu, load_kernel, weight_spec
from openafm.nn.packed_linear import PackedEmbedding, PackedKernel, PackedLinear
from openafm.runtime.kv_cache import KVCache


class StepKind(enum.Enum):
    AUTO = "auto"      # fused where the model allows it, eager otherwise (the reason is reported)
    FUSED = "fused"    # the C++ step; a model it cannot run raises
    EAGER = "eager"    # the module graph, one PyTorch operator at a time


class FusedStepUnsupported(ValueError):
    """StepKind.FUSED was asked for a model the fused step cannot run (the message says why)."""


def why_not_fused(model: nn.Module, cache: KVCache | None = None) -> str | None:
    """None if the fused step can run this model (and cache); else the reason, in words."""
    reason = _plan_reason(model, cache)
    if reason is None:
        try:
            _plan_specs(model)
            head_spec(model)
        except FusedStepUnsupported as e:
            return str(e)
    return reason


def _plan_reason(model: nn.Module, cache: KVCache | None) -> str | None:
    """Why not, from the model's kind, plan, CPU, dtype and cache alone (its layers are checked on building)."""
    if not isinstance(model, Decoder):
        return f"{type(model).__name__} runs eagerly (the fused step covers dense Decoder plans)"
    if (reason := config_reason(model.config)) is not None:
        return reason
    try:
        check_cpu("the fused decode step", "step=StepKind.EAGER")
    except KernelUnavailableError as e:
        return str(e)
    norm = model.norm.weight
    if norm.dtype != torch.float32 or norm.device.type != "cpu":
        return f"the fused step runs float32 on the CPU; this model is {norm.dtype} on {norm.device}"
    if cache is not None and cache.dtype != torch.float32:
        return f"the fused step reads a float32 KV cache; this one is {cache.dtype}"
    return None


def config_reason(config) -> str | None:
    """Why the fused step cannot run a model of this config whatever its weights; None if it can."""
    if any(s.ffn is FFNKind.MOE for s in config.layers):
        return "MoE layers run eagerly"
    if (extras := _eager_features(config)):
        return f"{', '.join(extras)} run eagerly (the fused step covers the Llama block)"
    return None


def _eager_features(config) -> list[str]:
    """The architecture features of `config` (models.plan.Features) that the C++ step does not compute."""
    f, plain = config.features, Features()
    names = {"norms": "sandwich norms",
             "activation": f"{f.activation.value} FFNs", "embed_scale": "scaled embeddings",
             "attn_scale": "a custom attention scale", "attn_softcap": "soft-capped attention",
             "logit_softcap": "soft-capped logits", "local_rope_theta": "per-layer rotary bases"}
    return [words for name, words in names.items() if getattr(f, name) != getattr(plain, name)]


def linear_spec(module: nn.Module, where: str) -> tuple:
    """The kernel's description of one linear layer (raises FusedStepUnsupported naming it)."""
    lora = None
    if isinstance(module, LoRALinear):
        lora = (module.lora_A.detach().float(), module.lora_B.detach().float(), module.scale)
        module = module.base
    if isinstance(module, (BlockLinear, BlockRows)):
        return module.spec(lora)
    if isinstance(module, PackedLinear):
        if module.kernel is not PackedKernel.CPU:
            raise FusedStepUnsupported(f"{where}: packed layers with kernel={module.kernel.value} run eagerly")
        return weight_spec(WeightFormat.PACKED, module.out_features, module.in_features, module.packed,
                           bits=module.bits, scale=module.scale, zero=module.zero, lora=lora)
    if isinstance(module, nn.Linear):
        if module.bias is not None:
            raise FusedStepUnsupported(f"{where}: linear layers with a bias run eagerly")
        if module.weight.dtype != torch.float32:
            raise FusedStepUnsupported(f"{where}: {module.weight.dtype} weights run eagerly (fused: float32)")
        return weight_spec(WeightFormat.F32, module.out_features, module.in_features, module.weight.detach(),
                           lora=lora)
    raise FusedStepUnsupported(f"{where}: {type(module).__name__} layers run eagerly")


def head_spec(model: Decoder) -> tuple:
    if model.lm_head is not None:
        return linear_spec(model.lm_head, "lm_head")
    embed = model.embed
    if isinstance(embed, (BlockEmbedding, PackedEmbedding)):
        return linear_spec(embed.table, "embed (tied head)")
    if isinstance(embed, nn.Embedding) and embed.weight.dtype == torch.float32:
        w = embed.weight.detach()
        return weight_spec(WeightFormat.F32, w.shape[0], w.shape[1], w)
    raise FusedStepUnsupported(f"embed: {type(embed).__name__} as a tied head runs eagerly")


def _plan_specs(model: Decoder) -> list:
    layers = []
    for i, (spec, block) in enumerate(zip(model.config.layers, model.layers)):
        attn = block.attn
        window = spec.window if spec.attention is AttentionKind.SLIDING_ROPE else 0
        attn_in = attn.qkv if spec.owns_kv else attn.q
        layers.append((block.attn_norm.weight.detach(), block.ffn_norm.weight.detach(), spec.owns_kv,
                       -1 if spec.owns_kv else spec.kv_source, spec.attention.uses_rope, window or 0,
                       linear_spec(attn_in, f"layers.{i}.attn.{'qkv' if spec.owns_kv else 'q'}"),
                       linear_spec(attn.out, f"layers.{i}.attn.out"),
                       linear_spec(block.ffn.gate_up, f"layers.{i}.ffn.gate_up"),
                       linear_spec(block.ffn.down, f"layers.{i}.ffn.down"),
                       _detached(attn.in_bias), _detached(getattr(attn, "q_norm", None), "weight"),
                       _detached(getattr(attn, "k_norm", None), "weight")))
    return layers


def _detached(owner, attribute: str | None = None) -> torch.Tensor | None:
    """A float32 tensor for the C++ step (a parameter, or a module's `attribute`), or None where there is none."""
    if owner is None:
        return None
    t = getattr(owner, attribute) if attribute else owner
    return t.detach().float().contiguous()


def _signature(model: Decoder) -> tuple:
    """What a built step depends on: the module objects and their tensors' storage, and the thread count."""
    tensors = [t for _, t in model.named_parameters()] + [t for _, t in model.named_buffers()]
    return (torch.get_num_threads(), tuple(id(m) for m in model.modules()),
            tuple((t.data_ptr(), t.dtype) for t in tensors))


class FusedDecoder:
    """The C++ step built over one model's modules; `__call__` runs one token per row through a KVCache."""

    def __init__(self, model: Decoder):
        c = model.config
        self.model, self.signature = model, _signature(model)
        layers, head = _plan_specs(model), head_spec(model)     # raise FusedStepUnsupported naming a layer
        self.native = load_kernel().DecodeStep(c.dim, c.n_heads, c.n_kv_heads, c.attn_head_dim, c.norm_eps,
                                               torch.get_num_threads())
        for layer in layers:
            self.native.add_layer(*layer)
        self.native.set_head(model.norm.weight.detach(), head, model.rope.cos, model.rope.sin_signed)
        self._bound = None
        self._lock = threading.Lock()      # one step at a time: the native step binds one cache (GIL released)

    def __call__(self, ids: torch.Tensor, cache: KVCache, positions: torch.Tensor) -> torch.Tensor:
        """ids [B, 1], positions [B, 1] -> logits [B, V] (float32); writes the step into `cache`."""
        x = self.model.embed_tokens(ids)[:, 0].float()                              # [B, D]
        return self._native(cache, positions, lambda step: self.native.step(x, positions[:, 0], step))

    def _native(self, cache: KVCache, positions: torch.Tensor, call) -> torch.Tensor:
        """call(step) with the native step bound to `cache`, its new positions recorded around the call."""
        with self._lock:
            self._bind(cache)
            step = cache.steps
            cache.begin(positions)
            try:
                return call(step)
            finally:
                cache.end(positions)

    def _bind(self, cache: KVCache) -> None:
        """Point the native step at `cache`'s storage (once per cache; call with the lock held)."""
        if self._bound is None or self._bound() is not cache:
            self.native.bind_cache([cache.layer_storage(i) for i in range(len(self.model.layers))])
            self._bound = weakref.ref(cache)

    def can_step_rows(self, cache, t: int) -> bool:
        """Whether `rows` can run t tokens per row on this cache: no ring wraps within the pass."""
        for i in range(len(self.model.layers)):
            storage = cache.layer_storage(i)
            if storage is not None and storage[5] and cache.steps + t > storage[5]:
                return False
        return True

    def _check_pass(self, cache, t: int, what: str) -> None:
        if not self.can_step_rows(cache, t):
            raise ValueError(f"the fused {what} cannot run {t} tokens at step {cache.steps}: a sliding-window ring "
                             f"would wrap within the pass")

    def rows(self, ids: torch.Tensor, cache, positions: torch.Tensor) -> torch.Tensor:
        """ids [B, T], positions [B, T] (-1 on a row's padding): T tokens of each row in one pass, each seeing its
        row's cache and the row's tokens before it (the engine's speculative step) -> logits [B, T, V]."""
        b, t = ids.shape
        self._check_pass(cache, t, "multi-token step (per row)")
        x = self.model.embed_tokens(ids).reshape(b * t, -1).float()                   # [B*T, D]
        logits = self._native(cache, positions, lambda step: self.native.rows(x, positions.reshape(-1), step, t))
        return logits.reshape(b, t, -1)                                                # [B, T, V]

    def ragged(self, ids: torch.Tensor, cache, positions: torch.Tensor, want: torch.Tensor) -> torch.Tensor:
        """ids, positions [B, T] (position -1: padding, not computed), want [B, T] bool: the slots whose logits
        return. Each token sees its row's cache and the row's tokens in earlier slots; rows may feed any number of
        tokens (the engine's speculative step: a row with 4 guesses beside rows with none costs 5 + (B - 1) tokens,
        not 5 B) -> logits [K, V] of the wanted slots, row-major."""
        b, t = ids.shape
        real = positions >= 0                                                          # [B, T]
        if bool((want & ~real).any()):
            raise ValueError("ragged: logits were asked of a padding slot (position -1)")
        self._check_pass(cache, t, "ragged step")
        rows, offsets = real.nonzero(as_tuple=True)                                    # [M], row-major
        heads = want[rows, offsets].nonzero(as_tuple=True)[0]                          # [K] into the M tokens
        x = self.model.embed_tokens(ids[rows, offsets][None])[0].float()               # [M, D]
        flat = positions[rows, offsets]
        return self._native(cache, positions, lambda step: self.native.ragged(x, flat, rows, offsets, step, heads))

    def prefill(self, ids: torch.Tensor, cache, positions: torch.Tensor) -> torch.Tensor:
        """ids [1, T], positions [1, T]: T prompt tokens of one sequence in one pass (`rows`' pass, with the head run on
        the last token only) -> logits [1, V]."""
        if ids.shape[0] != 1:
            raise ValueError(f"the fused prefill takes one sequence; got {ids.shape[0]} rows")
        self._check_pass(cache, ids.shape[1], "prefill")
        x = self.model.embed_tokens(ids)[0].float()                                   # [T, D]
        return self._native(cache, positions, lambda step: self.native.prefill(x, positions[0], step))


_BUILT: weakref.WeakKeyDictionary[nn.Module, FusedDecoder] = weakref.WeakKeyDictionary()


def fused_decoder(model: Decoder) -> FusedDecoder:
    """The model's fused step, rebuilt when its modules, weights' storage or the thread count changed."""
    built = _BUILT.get(model)
    if built is None or built.signature != _signature(model):
        built = _BUILT[model] = FusedDecoder(model)
    return built


def choose_step(kind: StepKind, model: nn.Module, cache: KVCache) -> tuple[FusedDecoder | None, str]:
    """-> (the fused step or None for eager, the words the timing line shows)."""
    if not isinstance(kind, StepKind):
        raise ValueError(f"step={kind!r} is not a StepKind; use one of {[k.value for k in StepKind]}")
    if kind is StepKind.EAGER:
        return None, "eager"
    reason = _plan_reason(model, cache)
    if reason is None:
        try:
            return fused_decoder(model), "fused"                # checks every layer when it (re)builds
        except FusedStepUnsupported as e:
            reason = str(e)
    if kind is StepKind.FUSED:
        raise FusedStepUnsupported(f"step=fused cannot run this model: {reason}")
    return None, f"eager ({reason})"
