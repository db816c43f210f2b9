"""Draft distillation: the target's greedy answers are scored, the head covers their tokens, the distillation loss
falls, and the distilled draft agrees with the target more often than the draft it started from."""

import torch
from tiny import make_tiny

from openafm.runtime.draft import build_draft
from openafm.runtime.generate import GenerationStats, generate_tokens
from openafm.runtime.proposers import ProposerKind
from openafm.train.draft import DraftTrainConfig, frequent_vocab, train_draft


def acceptance(target, draft, tokenizer, prompts):
    proposed = accepted = 0
    for p in prompts:
        ids = tokenizer.encode(tokenizer.apply_chat_template([{"role": "user", "content": p}]))
        stats = GenerationStats()
        generate_tokens(target, [ids], max_new_tokens=24, speculate=ProposerKind.DRAFT, draft=draft, gamma=3,
                        stats=stats)
        proposed, accepted = proposed + stats.proposed, accepted + stats.accepted
    return accepted / proposed


def test_distillation_lowers_the_loss_and_raises_acceptance(tokenizer, tmp_path):
    target = make_tiny("smollm2-tiny", vocab_size=49152, max_seq_len=512, tie_embeddings=False)
    with torch.no_grad():
        target.lm_head.weight.mul_(6)
    prompts = [f"Tell me about {w}." for w in ("cats", "rain", "ships", "bread", "tea", "maps")]
    config = DraftTrainConfig(n_layers=1, vocab=512, answer_tokens=24, epochs=30, lr=3e-3, batch=6)
    before = acceptance(target, build_draft(target, n_layers=1, vocab_ids=torch.arange(512)), tokenizer, prompts)
    draft, report = train_draft(target, tokenizer, prompts, config, progress=False, data_cache=tmp_path / "d.pt")
    assert report["final_loss"] < 0.8 * report["first_loss"]
    assert report["head_coverage"] == 1.0                      # every answer token is in the 512-row head
    after = acceptance(target, draft, tokenizer, prompts)
    assert after > before + 0.1, (before, after)
    again, cached = train_draft(target, tokenizer, prompts, config, progress=False, data_cache=tmp_path / "d.pt")
    assert cached["answer_seconds"] < 0.1                      # the answers and scores came from the cache


def test_frequent_vocab_orders_by_answer_counts():
    pairs = [([1, 2], [7, 7, 7, 9]), ([3], [9, 5])]
    assert frequent_vocab(pairs, 3, vocab_size=20, always={0}).tolist() == [0, 7, 9]
