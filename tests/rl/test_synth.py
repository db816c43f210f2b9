"""Rejection sampling: exactly the verified samples are kept (against the reward computed directly), majority voting
keeps the agreeing samples only above the agreement threshold, the JSONL reads back as SFT examples with their
provenance, and a tiny model's sampler is seeded and gives k samples."""

from __future__ import annotations

import pytest

from openafm.data.chat import read_chat_jsonl
from openafm.data.instructions import instruction_prompts
from openafm.errors import ConfigError
from openafm.rl.rewards.registry import make_reward
from openafm.rl.synthesis.rejection import SynthPrompt, Verifier, model_sampler, rejection_sample, write_synth_jsonl
from tiny import make_tiny


def table_sampler(table):
    """A stub: prompt -> its fixed list of responses (the first k); records the seeds it was called with."""
    seeds = []

    def sample(prompt, k, seed):
        seeds.append(seed)
        return table[prompt][:k]
    sample.seeds = seeds
    return sample


def test_keeps_exactly_the_verified_samples():
    table = {"2+2?": ["Answer: 4", "Answer: 5", "four", "so... Answer: 4.0"],
             "3*3?": ["Answer: 6", "Answer: 8", "Answer: 10", "Answer: 12"]}
    prompts = [SynthPrompt("2+2?", "4", "arith #0"), SynthPrompt("3*3?", "9", "arith #1")]
    sampler = table_sampler(table)
    kept, summary = rejection_sample(prompts, sampler, Verifier.from_reward("math"), k=4, seed=10)
    reward = make_reward("math")
    expected = [(p.prompt, r) for p in prompts for r in table[p.prompt] if reward(p.prompt, r, p.target) == 1.0]
    assert [(x.prompt, x.response) for x in kept] == expected == [("2+2?", "Answer: 4"), ("2+2?", "so... Answer: 4.0")]
    assert kept[1].meta == {"source": "arith #0", "verifier": "math", "reward": 1.0, "acceptance_rate": 0.5, "k": 4,
                            "sample": 3}
    assert summary["kept"] == 2 and summary["acceptance_rate"] == 2 / 8 and summary["prompts_with_a_kept_sample"] == 1
    assert sampler.seeds == [10, 11]


def test_instruction_prompts_through_the_instructions_reward():
    generated = instruction_prompts(20, seed=5)
    responses = ["Hello, World. Peace out.", "all lower case and short", '{"a": 1}',
                 "* one\n* two\n\n<<T>> That is all."]
    prompts = [SynthPrompt(p.prompt, p.constraints, p.where) for p in generated]
    reward = make_reward("instructions", aggregate="all")
    kept, summary = rejection_sample(prompts, lambda q, k, s: responses[:k],
                                     Verifier.from_reward("instructions", aggregate="all"), k=4)
    expected = [(p.prompt, r) for p in generated for r in responses if reward(p.prompt, r, p.constraints) == 1.0]
    assert [(x.prompt, x.response) for x in kept] == expected
    assert 0 < len(kept) < 80 and summary["acceptance_rate"] == len(kept) / 80


def test_threshold_accepts_partial_rewards():
    prompt = SynthPrompt("q", [{"kind": "no-commas"}, {"kind": "lowercase"}], "s")
    kept, _ = rejection_sample([prompt], lambda q, k, s: ["a, b", "A B", "a b"][:k],
                               Verifier.from_reward("instructions", threshold=0.5, level="strict"), k=3)
    assert [(x.response, x.meta["reward"]) for x in kept] == [("a, b", 0.5), ("A B", 0.5), ("a b", 1.0)]


def test_majority_vote():
    table = {"q1": ["Answer: 7", "Answer: 7.", "Answer: 8", "no idea"],
             "q2": ["Answer: 1", "Answer: 2", "Answer: 3", "Answer: 1"]}
    prompts = [SynthPrompt("q1", None, "a"), SynthPrompt("q2", None, "b")]
    kept, _ = rejection_sample(prompts, table_sampler(table), Verifier.majority(min_agreement=0.5), k=4)
    assert [(x.prompt, x.response) for x in kept] == [("q1", "Answer: 7"), ("q1", "Answer: 7."), ("q2", "Answer: 1"),
                                                      ("q2", "Answer: 1")]
    assert kept[0].meta["agreement"] == 0.5 and kept[0].meta["answer"] == "7"
    strict, _ = rejection_sample(prompts, table_sampler(table), Verifier.majority(min_agreement=0.75), k=4)
    assert strict == []                                    # 2 of 4 agree at most: below 3 of 4


def test_reward_verifier_needs_a_target_and_k_is_checked():
    with pytest.raises(ConfigError, match="majority"):
        rejection_sample([SynthPrompt("q", None, "src")], lambda q, k, s: ["x"] * k, Verifier.from_reward("math"), k=2)
    with pytest.raises(ConfigError, match="k=0"):
        rejection_sample([SynthPrompt("q", "1")], lambda q, k, s: [], Verifier.from_reward("math"), k=0)
    with pytest.raises(ValueError, match="returned 1 responses for k=2"):
        rejection_sample([SynthPrompt("q", "1")], lambda q, k, s: ["x"], Verifier.from_reward("math"), k=2)


def test_jsonl_reads_back_as_sft_examples(tmp_path):
    kept, _ = rejection_sample([SynthPrompt("2+2?", "4", "arith #0")], lambda q, k, s: ["Answer: 4", "5"][:k],
                               Verifier.from_reward("math"), k=2)
    path = write_synth_jsonl(tmp_path / "out.jsonl", kept)
    (example,) = read_chat_jsonl(path)
    assert (example.prompt, example.response) == ("2+2?", "Answer: 4")
    assert example.meta == {"source": "arith #0", "verifier": "math", "reward": 1.0, "acceptance_rate": 0.5, "k": 2,
                            "sample": 0}


def test_model_sampler_is_seeded(tokenizer):
    model = make_tiny("smollm2-tiny", vocab_size=tokenizer.vocab_size)
    sample = model_sampler(model, tokenizer, max_new_tokens=6, temperature=5.0, top_p=None)   # a flat tiny model
    a, b, c = sample("Hi", 3, 0), sample("Hi", 3, 0), sample("Hi", 3, 1)
    assert len(a) == 3 and a == b and a != c and len(set(a)) > 1
    with pytest.raises(ConfigError, match="temperature > 0"):
        model_sampler(model, tokenizer, max_new_tokens=4, temperature=0.0)
