"""Speculative decoding with a draft model as the engine's proposer: greedy output equals plain greedy on every model
family (dense, KV sharing, sliding windows that wrap, PT-MoE), sample-then-compare keeps the target's distribution
(chi-square), the fused multi-token pass equals one-token steps bit for bit, and constrained speculative decoding
only emits valid structures."""

import copy
import json

import jsonschema
import pytest
import torch

from openafm.errors import CheckpointError
from openafm.models.build import build_model
from openafm.models.presets import get_preset
from openafm.nn.lora import apply_lora
from openafm.nn.packed_model import QuantizedCodes, pack_model
from openafm.runtime.constrained import GrammarConstraint
from openafm.runtime.conversation import Conversation
from openafm.runtime.draft import DraftModel, build_draft, load_draft, save_draft
from openafm.runtime.fused_step import fused_decoder
from openafm.runtime.generate import FinishReason, GenerationStats, generate_tokens
from openafm.runtime.kv_cache import KVCache
from openafm.runtime.proposers import ProposerKind
from openafm.runtime.sampling import SamplingParams
from packed_codes import rtn_codes
from tiny import make_tiny

PROMPT = [[5, 6, 7, 8, 9, 10, 11]]
DRAFT = ProposerKind.DRAFT


def speculative(target, draft, prompts, **kw):
    """generate_tokens with the draft's guesses verified in the engine's step."""
    return generate_tokens(target, prompts, speculate=DRAFT, draft=draft, **kw)
FAMILIES = ["smollm2-tiny", "afm-ondevice-tiny", "afm-server-dense-tiny"]   # dense, KV sharing, rings of 16


def target_model(name: str, **changes):
    """A tiny model with an untied, sharpened head: its greedy output varies (a tied random head repeats)."""
    model = make_tiny(name, tie_embeddings=False, **changes)
    with torch.no_grad():
        model.lm_head.weight.mul_(8)
    return model


def noisy(model, scale: float, seed: int = 1):
    """A copy with Gaussian noise on every weight: a draft that agrees with the target part of the time."""
    out = copy.deepcopy(model)
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in out.parameters():
            p.add_(torch.randn(p.shape, generator=g) * p.std() * scale)
    return out


@pytest.mark.parametrize("name", FAMILIES)
@pytest.mark.parametrize("gamma", [1, 3, 6])
def test_greedy_equals_plain_greedy(name, gamma):
    target = target_model(name)
    plain = generate_tokens(target, PROMPT, max_new_tokens=60)[0].token_ids     # 60 tokens pass the windows
    stats = GenerationStats()
    out = speculative(target, DraftModel(noisy(target, 0.3)), PROMPT, max_new_tokens=60, gamma=gamma,
                      stats=stats)[0].token_ids
    assert out == plain
    assert 0 < stats.accepted < stats.proposed                # both paths taken: accepted and rejected guesses
    assert stats.step == "fused"


def test_greedy_with_a_built_draft_and_a_batch():
    target = target_model("smollm2-tiny")
    draft = build_draft(target, n_layers=2, vocab_ids=torch.arange(0, 512, 2))     # half the vocabulary
    prompts = [[5, 6, 7, 8, 9, 10, 11], [3, 4]]                                     # left padding
    plain = [g.token_ids for g in generate_tokens(target, prompts, max_new_tokens=40)]
    out = [g.token_ids for g in speculative(target, draft, prompts, max_new_tokens=40, gamma=4)]
    assert out == plain


def test_ptmoe_greedy_equals_plain_greedy():
    target = build_model(get_preset("afm-server-tiny")).eval()
    plain = generate_tokens(target, PROMPT, max_new_tokens=50)[0].token_ids
    draft = DraftModel(target_model("afm-server-dense-tiny"))                   # another family as the draft
    stats = GenerationStats()
    out = speculative(target, draft, PROMPT, max_new_tokens=50, gamma=3, stats=stats)[0].token_ids
    assert out == plain and stats.step.startswith("eager") and stats.proposed > 0


def assert_scoring_pass_equals_one_token_steps(model) -> None:
    """After the same 5-token prefill, one fused pass over 6 tokens (the engine's multi-slot step) gives the logits
    of 6 one-token fused steps, bit for bit."""
    ids = torch.arange(1, 12)[None]
    a, b = (KVCache(model.config, batch_size=1, capacity=32) for _ in range(2))
    step = fused_decoder(model)
    with torch.inference_mode():
        model(ids[:, :5], cache=a)
        model(ids[:, :5], cache=b)
        one = torch.stack([step(ids[:, i:i + 1], a, torch.tensor([[i]]))[0] for i in range(5, 11)])
        many = step.rows(ids[:, 5:11], b, torch.arange(5, 11)[None])[0]
    assert torch.equal(one, many)


@pytest.mark.parametrize("name", FAMILIES)
def test_fused_scoring_pass_equals_one_token_steps_bitwise(name):
    model = target_model(name)
    assert_scoring_pass_equals_one_token_steps(model)


@pytest.mark.parametrize("bits", [2, 8])
def test_fused_scoring_pass_on_packed_weights_with_lora(bits):
    """The 2-bit (and 8-bit) packed target with a LoRA adapter: scoring pass = one-token steps, bit for bit, and
    greedy speculative decoding = plain greedy."""
    model = target_model("smollm2-tiny")
    pack_model(model, {name: QuantizedCodes(*rtn_codes(p.detach(), bits), bits)
                       for name, p in model.named_parameters() if p.ndim == 2})
    apply_lora(model, rank=4, alpha=8.0, targets=("qkv", "down"))
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "lora_B" in name:
                p.normal_(0, 0.05)
    assert_scoring_pass_equals_one_token_steps(model)
    plain = generate_tokens(model, PROMPT, max_new_tokens=40)[0].token_ids
    assert speculative(model, DraftModel(noisy(target_model("smollm2-tiny"), 0.3)), PROMPT,
                       max_new_tokens=40, gamma=4)[0].token_ids == plain


CHI2_7_DOF_P001 = 24.32        # chi-square critical value, 7 degrees of freedom (8 tokens), p = 0.001


def chi_square(observed: torch.Tensor, expected: torch.Tensor) -> float:
    return float(((observed - expected) ** 2 / expected).sum())


def test_acceptance_rule_keeps_the_target_distribution():
    """Vocabulary of 8: the second token's marginal under speculative sampling (1 guess from a noisy draft, accepted
    when the target's own draw equals it) equals the exact marginal sum_x1 p(x1) p(x2 | x1) of the target."""
    target = target_model("smollm2-tiny", vocab_size=8)
    with torch.no_grad():
        target.lm_head.weight.mul_(0.15)                       # a spread-out distribution
    draft = DraftModel(noisy(target, 1.0))
    prompt = [1, 2, 3]
    with torch.inference_mode():
        p1 = target(torch.tensor([prompt]))[0, -1].softmax(-1)                              # [8]
        p2 = torch.stack([target(torch.tensor([prompt + [x]]))[0, -1].softmax(-1) for x in range(8)])
    exact = (p1[:, None] * p2).sum(0)                                                       # [8]
    n, counts, proposed, accepted = 1000, torch.zeros(8), 0, 0
    for seed in range(n):
        stats = GenerationStats()
        out = speculative(target, draft, [prompt], max_new_tokens=3, gamma=1, stats=stats,
                          sampling=SamplingParams(temperature=1.0, seed=seed))[0].token_ids
        counts[out[1]] += 1
        proposed, accepted = proposed + stats.proposed, accepted + stats.accepted
    assert 0.1 < accepted / proposed < 0.95                   # the rule's both branches are exercised
    assert chi_square(counts, exact * n) < CHI2_7_DOF_P001, (counts / n, exact)
    # a wrong rule (always accept the draft's token) is caught by the same test
    with torch.inference_mode():
        q1 = draft.model(torch.tensor([prompt]))[0, -1].softmax(-1)
        q2 = torch.stack([draft.model(torch.tensor([prompt + [x]]))[0, -1].softmax(-1) for x in range(8)])
    wrong = (p1[:, None] * q2).sum(0)
    assert chi_square(wrong * n, exact * n) > CHI2_7_DOF_P001


PERSON = {"type": "object", "properties": {
    "name": {"type": "string", "maxLength": 12},
    "age": {"type": "integer", "minimum": 0, "maximum": 120},
    "colour": {"enum": ["red", "green", "blue"]},
    "tags": {"type": "array", "items": {"type": "string", "maxLength": 8}, "minItems": 1, "maxItems": 3}},
    "required": ["name", "age", "colour", "tags"], "additionalProperties": False}


@pytest.fixture(scope="module")
def json_pair():
    target = target_model("smollm2-tiny", vocab_size=49152, max_seq_len=512)
    return target, DraftModel(noisy(target, 0.3))


@pytest.mark.parametrize("seed", [None, 0, 1, 2])
def test_constrained_speculative_always_validates(json_pair, tokenizer, seed):
    target, draft = json_pair
    sampling = SamplingParams() if seed is None else SamplingParams(temperature=1.0, seed=seed)
    kw = dict(max_new_tokens=200, sampling=sampling, tokenizer=tokenizer, eos_token_ids=set(tokenizer.eos_token_ids))
    prompt = [tokenizer.encode("Person: ")]
    stats = GenerationStats()
    out = speculative(target, draft, prompt, gamma=4, stats=stats,
                      constraint=GrammarConstraint.from_json_schema(PERSON, tokenizer), **kw)[0]
    assert out.finish_reason in (FinishReason.COMPLETE, FinishReason.EOS)
    jsonschema.validate(json.loads(out.text), PERSON)
    assert stats.forced_tokens > 0 and stats.proposed > 0
    if seed is None:                                         # greedy: the same object as plain fast-forward decoding
        plain = generate_tokens(target, prompt, constraint=GrammarConstraint.from_json_schema(PERSON, tokenizer), **kw)
        assert out.token_ids == plain[0].token_ids


def test_draft_round_trip_and_foreign_target(tmp_path):
    target = target_model("smollm2-tiny")
    draft = build_draft(target, n_layers=1, vocab_ids=torch.arange(100), target_name="tiny")
    save_draft(tmp_path / "d", draft)
    back = load_draft(tmp_path / "d", target)
    ids = torch.tensor([[1, 2, 3]])
    assert torch.equal(back.model(ids), draft.model(ids))
    with pytest.raises(CheckpointError, match="token embeddings"):
        load_draft(tmp_path / "d", make_tiny("smollm2-tiny", seed=5))


def test_bad_gamma_and_vocabulary_are_refused():
    target = target_model("smollm2-tiny")
    with pytest.raises(ValueError, match="gamma=0"):
        speculative(target, DraftModel(target), PROMPT, max_new_tokens=4, gamma=0)
    with pytest.raises(ValueError, match="vocabulary"):
        speculative(target, DraftModel(make_tiny("smollm2-tiny", vocab_size=64)), PROMPT, max_new_tokens=4)


def test_conversation_with_a_draft_equals_one_without(tokenizer):
    """Two turns of a session-style conversation (the cache continued, the draft reading the history) give the same
    tokens, and the draft's guesses were verified."""
    target = target_model("smollm2-tiny", vocab_size=49152, max_seq_len=512)
    outs = []
    for draft in (None, DraftModel(noisy(target, 0.3))):
        conv = Conversation(target, tokenizer, draft=draft, gamma=3)
        turns = []
        for text in ("Hello there. ", " And then? "):
            conv.append_text(text)
            turns.append(conv.generate(max_new_tokens=30).token_ids)
        outs.append((turns, conv.tokens, conv.cached))
    assert outs[0] == outs[1]


def test_a_draft_of_an_adapted_target_saves_plain_weights(tmp_path):
    target = target_model("smollm2-tiny")
    apply_lora(target, rank=2, alpha=2.0, targets=("qkv", "down"))
    with torch.no_grad():
        for name, p in target.named_parameters():
            if "lora_B" in name:
                p.normal_(0, 0.05)
    draft = build_draft(target, n_layers=2)
    back = load_draft(save_draft(tmp_path / "d", draft), target)
    ids = torch.tensor([[1, 2, 3, 4]])
    torch.testing.assert_close(back.model(ids), draft.model(ids))
    assert not any("lora" in k for k in back.model.state_dict())           # folded into the copied weights
