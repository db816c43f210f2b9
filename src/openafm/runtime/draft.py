"""A draft model for speculative decoding: a small decoder over the target's tokenizer, optionally reading the
target's own embedding table and predicting only a frequent subset of the vocabulary.

Shape (what pays on a CPU): a few layers of the target's width, initialised from the target's first layers,
the target's embedding shared as the input table (no second copy), and an output head over the `vocab_ids`
most frequent tokens only. A full 49,152-row head costs as much as ~8 of SmolLM2's 30 layers per token; a
head of 8,192 rows costs ~1.3 layers, and tokens outside it are simply never proposed (the target's
distribution still decides: speculative sampling's rule makes the output exact whatever the draft proposes).

Directory format (`save_draft` / `load_draft`): `draft.safetensors` (the draft's own tensors: layers, final
norm, head, vocab_ids) and `draft.json` (its DecoderConfig, the target's name and the fingerprint of the
target's token embeddings, as float32 values). The draft reads that table, so a target with another one (another
tokenizer or model) is refused; the same model held as float32 or as its GGUF blocks has the same values and is
accepted. Speculative decoding's output never depends on the draft (it only changes the speed).
"""

from __future__ import annotations

import copy
import dataclasses
import json
from pathlib import Path

import torch
from safetensors.torch import load_file
from torch import nn

from openafm.checkpoint.atomic import save_safetensors_atomic
from openafm.checkpoint.fingerprint import embedding_fingerprint
from openafm.io import write_text_atomic
from openafm.errors import CheckpointError
from openafm.models.decoder import CausalLM, Decoder
from openafm.models.plan import DecoderConfig, LayerSpec
from openafm.nn.linear import Linear
from openafm.nn.lora import merge_lora

FORMAT = "openafm-draft"
FORMAT_VERSION = 1


class DraftModel:
    """A CausalLM that proposes tokens for a target, and which target ids its logits' columns are.

    model: any CausalLM over the target's tokenizer (a Decoder runs the fused C++ step).
    vocab_ids: [K] target token ids the model's K output columns stand for (None: the whole vocabulary).
    target_fingerprint: embedding_fingerprint of the target it was distilled from (None: not recorded).
    """

    def __init__(self, model: CausalLM, vocab_ids: torch.Tensor | None = None, *, vocab_size: int | None = None,
                 target_name: str = "", target_fingerprint: str | None = None):
        self.model = model.eval()
        self.vocab_ids = None if vocab_ids is None else vocab_ids.long()
        self.vocab_size = vocab_size if vocab_size is not None else model.kv_plan.vocab_size
        self.target_name, self.target_fingerprint = target_name, target_fingerprint

    def full_logits(self, logits: torch.Tensor) -> torch.Tensor:
        """The model's logits [..., K] -> logits over the whole vocabulary [..., V] (-inf off the subset)."""
        if self.vocab_ids is None:
            return logits
        out = logits.new_full((*logits.shape[:-1], self.vocab_size), float("-inf"))
        out[..., self.vocab_ids] = logits
        return out

    def num_parameters(self, *, own: bool = True) -> int:
        """Parameters of the draft (own=True: without a table shared with the target)."""
        shared = {id(p) for p in getattr(self, "_shared", ())}
        return sum(p.numel() for p in self.model.parameters() if not (own and id(p) in shared))

    def check_target(self, target: nn.Module, *, where: str = "draft") -> None:
        """Raise CheckpointError when the draft was made for a target with other token embeddings."""
        if self.target_fingerprint is None:
            return
        actual = embedding_fingerprint(target)
        if actual != self.target_fingerprint:
            raise CheckpointError(f"{where}: the draft was made for {self.target_name!r} whose token embeddings are "
                                  f"{self.target_fingerprint}, but this target's are {actual} (another model or "
                                  f"tokenizer: train a draft for it with `openafm draft train`)")


def draft_config(target: DecoderConfig, *, n_layers: int, vocab: int | None = None) -> DecoderConfig:
    """A draft of `n_layers` global-RoPE layers of the target's width (untied: the head is the draft's own)."""
    if n_layers < 1:
        raise ValueError(f"n_layers={n_layers} is invalid: a draft needs at least one layer")
    layers = [LayerSpec() for _ in range(n_layers)]
    return dataclasses.replace(target, layers=layers, tie_embeddings=False, moe=None)


def build_draft(target: Decoder, *, n_layers: int = 2, vocab_ids: torch.Tensor | None = None,
                target_name: str = "") -> DraftModel:
    """A draft initialised from the target: its first `n_layers` layers (copied; owner layers only), its final
    norm, its embedding shared (not copied), and a head of the target's output rows for `vocab_ids`."""
    config = draft_config(target.config, n_layers=n_layers)
    owners = [i for i, s in enumerate(target.config.layers) if s.owns_kv and s.ffn.value == "dense"]
    if len(owners) < n_layers:
        raise ValueError(f"the target has {len(owners)} dense layers with their own K/V; a draft of {n_layers} "
                         f"layers is initialised from them: use n_layers <= {len(owners)}")
    model = Decoder(config, device="meta")
    model.embed = target.embed                                            # shared, frozen
    model.rope = target.rope
    model.norm = _copy_module(target.norm)
    model.layers = nn.ModuleList(_copy_module(target.layers[i]) for i in owners[:n_layers])
    for i, (block, spec) in enumerate(zip(model.layers, config.layers)):
        block.attn.index, block.attn.spec = i, spec
    head = _head_rows(target, vocab_ids)                                  # [K, D]
    model.lm_head = Linear(config.dim, head.shape[0], bias=False)
    with torch.no_grad():
        model.lm_head.weight.copy_(head)
    draft = DraftModel(model, vocab_ids, vocab_size=config.vocab_size, target_name=target_name,
                       target_fingerprint=embedding_fingerprint(target))
    draft._shared = list(target.embed.parameters()) + list(target.embed.buffers())
    for p in target.embed.parameters():
        p.requires_grad_(False)
    return draft


def _copy_module(module: nn.Module) -> nn.Module:
    """A copy with its own tensors; LoRA adapters (a base + adapter target) folded into the copied weights, and
    weights held as GGUF blocks or packed codes (a target loaded native) dequantized into float Linear layers: a
    draft is trained, and saved in float."""
    out = copy.deepcopy(module)
    merge_lora(out)
    _dequantized_in_place(out)
    return out


def _dequantized_in_place(module: nn.Module) -> None:
    for name, child in list(module.named_children()):
        if isinstance(child, nn.Linear) or not hasattr(child, "weight_dequantized"):
            _dequantized_in_place(child)
            continue
        weight = child.weight_dequantized().detach()                          # float32 [out, in]
        linear = Linear(weight.shape[1], weight.shape[0], bias=False)
        with torch.no_grad():
            linear.weight.copy_(weight)
        setattr(module, name, linear)


def _head_rows(target: CausalLM, vocab_ids: torch.Tensor | None) -> torch.Tensor:
    """The target's output-head rows (float32 [K, D]) for vocab_ids (all rows when None)."""
    n = target.kv_plan.vocab_size
    ids = torch.arange(n) if vocab_ids is None else vocab_ids.long()
    if target.lm_head is not None:
        return target.lm_head.weight.detach().float()[ids].clone()
    with torch.no_grad():
        return target.embed(ids).float().clone()                        # tied: the head is the embedding


def save_draft(directory: str | Path, draft: DraftModel) -> Path:
    """Write the draft's own tensors and config (atomically); the shared embedding is not written."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    state = {k: v.detach().contiguous() for k, v in draft.model.state_dict().items()
             if not k.startswith(("embed.", "rope."))}                   # the embedding is the target's
    if draft.vocab_ids is not None:
        state["vocab_ids"] = draft.vocab_ids
    save_safetensors_atomic(state, directory / "draft.safetensors", {"format": FORMAT})
    meta = {"format": FORMAT, "format_version": FORMAT_VERSION, "config": draft.model.config.to_dict(),
            "target_name": draft.target_name, "target_fingerprint": draft.target_fingerprint,
            "shares_embedding": True, "head_rows": int(draft.model.lm_head.weight.shape[0])}
    write_text_atomic(directory / "draft.json", json.dumps(meta, indent=1))
    return directory


def load_draft(directory: str | Path, target: Decoder, *, check: bool = True) -> DraftModel:
    """A saved draft over `target` (whose embedding it reads); raises CheckpointError for a foreign target."""
    directory = Path(directory)
    meta_path, weights = directory / "draft.json", directory / "draft.safetensors"
    if not meta_path.is_file() or not weights.is_file():
        raise CheckpointError(f"{directory}: not a draft directory (needs draft.json and draft.safetensors; "
                              f"make one with `openafm draft train`)")
    meta = json.loads(meta_path.read_text())
    if meta.get("format") != FORMAT or meta.get("format_version") != FORMAT_VERSION:
        raise CheckpointError(f"{meta_path}: format {meta.get('format')!r} v{meta.get('format_version')} is not "
                              f"{FORMAT!r} v{FORMAT_VERSION}")
    config = DecoderConfig.from_dict(meta["config"])
    state = load_file(str(weights))
    vocab_ids = state.pop("vocab_ids", None)
    model = Decoder(config, device="meta")
    model.embed, model.rope = target.embed, target.rope
    model.lm_head = Linear(config.dim, meta["head_rows"], bias=False, device="meta")
    model.load_state_dict(state, strict=False, assign=True)
    missing = [k for k, _ in model.named_parameters() if _.is_meta]
    if missing:
        raise CheckpointError(f"{weights}: missing tensors {missing[:5]}")
    draft = DraftModel(model, vocab_ids, vocab_size=config.vocab_size, target_name=meta["target_name"],
                       target_fingerprint=meta["target_fingerprint"])
    draft._shared = list(target.embed.parameters()) + list(target.embed.buffers())
    if check:
        draft.check_target(target, where=str(directory))
    return draft
