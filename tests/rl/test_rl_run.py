"""`openafm rl`: the synchronous RLOO run on a tiny model with the real tokenizer — end to end through the CLI, a
killed run resuming bit-exactly, the prompt mixture and held-out split, batched rollouts, and bad configs named."""

from __future__ import annotations

import json

import pytest
import torch
import yaml

from openafm.checkpoint.load import load_model
from openafm.checkpoint.native import save_checkpoint
from openafm.cli import main
from openafm.errors import ConfigError
from openafm.rl.config import PromptSetConfig, RLConfig
from openafm.rl.prompts import PromptRecord, PromptSource, build_prompts
from openafm.rl.rewards.registry import REWARDS, UnknownRewardError
from openafm.rl.rollout import Row, forward_logprobs, micro_batches, pack_rows, row_logprobs, sample_rows
from openafm.rl.run import METRICS_FILE, POLICY_DIR, SUMMARY_FILE, PromptMixture, RLRun, render
from openafm.rl.set_rewards import build_reward
from openafm.splits import Split, split_of
from openafm.train.metrics import read_metrics, without_timing
from tiny import make_tiny


@pytest.fixture(autouse=True)
def letters_reward(monkeypatch):
    """A dense test reward (the share of letters in the response), so a random model's samples differ in reward."""
    monkeypatch.setitem(REWARDS, "letters", lambda: lambda prompt, response, target:
                        sum(c.isalpha() for c in response) / max(1, len(response)))


@pytest.fixture
def base(tmp_path, tokenizer):
    model = make_tiny("smollm2-tiny", vocab_size=tokenizer.vocab_size, max_seq_len=512)
    save_checkpoint(tmp_path / "base", model.config, model.state_dict(), tokenizer)
    return str(tmp_path / "base")


def config(base, run_dir, **changes) -> dict:
    data = {"model": base, "run_dir": str(run_dir), "steps": 3, "prompts_per_step": 2, "max_new_tokens": 5, "temperature": 5.0,
            "micro_batch": 3, "progress": False, "rloo": {"k": 3},
            "optimizer": {"lr": 1e-3, "weight_decay": 0.0, "grad_clip": 1.0},
            "heldout": {"every": 2, "size": 3}, "checkpoint": {"every": 2, "keep": 2},
            "prompt_sets": [{"name": "ifeval", "source": "instructions", "weight": 1.0, "reward": "letters",
                             "pool": 8, "options": {"most": 1}}]}
    data.update(changes)
    return data


def test_rl_cli_end_to_end(tmp_path, base, capsys):
    path = tmp_path / "rl.yaml"
    path.write_text(yaml.safe_dump(config(base, tmp_path / "run")))
    assert main(["rl", str(path)]) == 0
    summary = json.loads(capsys.readouterr().out)
    records = read_metrics(tmp_path / "run" / METRICS_FILE)
    assert [r["step"] for r in records] == [0, 1, 2, 3]
    assert set(records[0]) == {"step", "heldout/ifeval"}
    for key in ("reward", "reward/ifeval", "kl", "loss", "entropy", "clip_fraction", "grad_norm", "response_tokens"):
        assert key in records[1], key
    assert "heldout/ifeval" in records[2] and "heldout/ifeval" in records[3]
    assert records[1]["kl"] == pytest.approx(0.0, abs=1e-5)          # the first samples come from the reference
    assert records[1]["ratio"] == pytest.approx(1.0, abs=1e-5)       # fresh samples: importance ratio 1
    assert summary["heldout_after"]["heldout/ifeval"] == records[3]["heldout/ifeval"]
    assert json.loads((tmp_path / "run" / SUMMARY_FILE).read_text()) == summary
    policy = load_model(str(tmp_path / "run" / POLICY_DIR)).model
    start = load_model(base).model
    assert any(not torch.equal(a, b)
               for a, b in zip(policy.state_dict().values(), start.state_dict().values(), strict=True))
    assert main(["rl", str(path)]) == 2                               # a second fresh run into the same dir
    assert "--resume" in capsys.readouterr().err
    assert main(["plot", str(tmp_path / "run")]) == 0
    assert (tmp_path / "run" / "curves.png").stat().st_size > 10_000


def test_killed_run_resumes_bit_exactly(tmp_path, base):
    straight = RLRun(RLConfig.from_dict(config(base, tmp_path / "a", steps=4)))
    straight.run()
    killed = RLRun(RLConfig.from_dict(config(base, tmp_path / "b", steps=4)))
    assert killed.run(stop_after=3) == {"stopped_at": 3}              # checkpoint at 2; step 3 is lost
    resumed = RLRun(RLConfig.from_dict(config(base, tmp_path / "b", steps=4)))
    assert resumed.run(resume=True)["steps"] == 4
    for (name, a), b in zip(straight.policy.state_dict().items(), resumed.policy.state_dict().values(), strict=True):
        assert torch.equal(a, b), name
    assert without_timing(read_metrics(tmp_path / "a" / METRICS_FILE)) == \
        without_timing(read_metrics(tmp_path / "b" / METRICS_FILE))


def test_mixture_follows_weights_and_is_seeded():
    pools = [[PromptRecord(f"a{i}", None, "") for i in range(5)], [PromptRecord(f"b{i}", None, "") for i in range(50)]]
    mix = PromptMixture(pools, [1.0, 3.0], seed=0)
    drawn = [s for step in range(200) for s, _ in mix.draw(step, 8)]
    assert drawn.count(1) / len(drawn) == pytest.approx(0.75, abs=0.02)
    seen = [r.prompt for step in range(3) for s, r in PromptMixture(pools, [1.0, 0.001], seed=1).draw(step, 5)
            if s == 0]
    assert sorted(seen[:5]) == [f"a{i}" for i in range(5)]            # one epoch: each prompt once
    again = PromptMixture(pools, [1.0, 3.0], seed=0)
    assert [r.prompt for _, r in again.draw(0, 8)] == [r.prompt for _, r in PromptMixture(pools, [1.0, 3.0], 0)
                                                       .draw(0, 8)]


@pytest.mark.parametrize("source, options", [
    (PromptSource.REASONING_GYM, {"dataset": "chain_sum", "config": {"min_terms": 2, "max_terms": 2, "max_digits": 1}}),
    (PromptSource.INSTRUCTIONS, {"most": 2}),
])
def test_heldout_prompts_are_in_no_train_pool_of_any_size(source, options):
    """Single-digit sums have ~100 distinct questions: a 2,000-prompt train pool repeats them all it may, and
    still holds none of the held-out ones, since a question's split is a function of its text."""
    held = build_prompts(source, options, Split.HELDOUT, size=40, seed=0)
    assert 0 < len(held) <= 40 and len({r.key for r in held}) == len(held)
    assert all(split_of(r.key, "prompt") is Split.HELDOUT for r in held)
    for seed in (0, 1, 7):
        train = build_prompts(source, options, Split.TRAIN, size=2000, seed=seed)
        assert len(train) == 2000 and not {r.key for r in held} & {r.key for r in train}


def test_pack_rows_marks_the_sampled_tokens():
    tokens, mask = pack_rows([Row([5, 6], [7, 8, 2], True), Row([5, 6, 9], [4], False)])
    assert tokens.tolist() == [[5, 6, 7, 8, 2], [5, 6, 9, 4, 0]]
    assert mask.tolist() == [[0, 1, 1, 1], [0, 0, 1, 0]]              # position t predicts token t + 1


def test_micro_batches_cut_padding_and_keep_each_rows_logprobs():
    model = make_tiny("smollm2-tiny", vocab_size=300, max_seq_len=64).eval()
    rows = [Row([1, 2, 3], [4, 5], False), Row(list(range(1, 21)), [6] * 5, False), Row([7] * 7, [8], False),
            Row([9, 9], [10] * 9, False)]                                   # 5, 25, 8 and 11 tokens
    tokens, mask = pack_rows(rows)
    groups = micro_batches(mask, 2)
    assert [(g.tolist(), w) for g, w in groups] == [([1, 3], 25), ([2, 0], 8)]     # longest first, own widths
    with torch.no_grad():
        whole = forward_logprobs(model, tokens, 1.0)[0]                     # every row at the step's width
    cut = row_logprobs(model, tokens, mask, temperature=1.0, micro_batch=2)
    torch.testing.assert_close(cut * mask, whole * mask, rtol=1e-5, atol=1e-5)


def test_sample_rows_keeps_the_end_token(tokenizer):
    model = make_tiny("smollm2-tiny", vocab_size=tokenizer.vocab_size, max_seq_len=128)
    eos = set(range(0, tokenizer.vocab_size, 8))                     # about one token in 8 ends a row
    seen = []
    for seed in range(4):                                               # draws where rows stop and where they run on
        rows = sample_rows(model, [[1, 2, 3], [4, 5]], k=3, max_new_tokens=6, temperature=5.0, seed=seed,
                           eos_token_ids=eos, batch=4)
        assert len(rows) == 6 and [r.prompt for r in rows] == [[1, 2, 3]] * 3 + [[4, 5]] * 3
        for r in rows:
            assert r.stopped == (r.response[-1] in eos) and len(r.response) <= 6
            assert r.text_ids == (r.response[:-1] if r.stopped else r.response)
        seen += rows
    assert any(r.stopped for r in seen) and any(not r.stopped for r in seen)


@pytest.mark.parametrize("change, error, named", [
    ({"prompt_sets": [{"name": "x", "source": "instructions", "weight": 0.0, "reward": "instructions"}]},
     ConfigError, "weight=0.0"),
    ({"prompt_sets": [{"name": "x", "source": "instructions", "weight": 1.0, "reward": "nope"}]},
     UnknownRewardError, "'nope'"),
    ({"rloo": {"k": 1}}, ConfigError, "k=1"),
    ({"prompt_sets": [{"name": "x", "source": "reasoning-gym", "weight": 1.0, "reward": "math"}]},
     ConfigError, "options.dataset"),
    ({"prompt_sets": [{"name": "x", "source": "instructions", "weight": 1.0, "reward": "math",
                       "options": {"colour": 1}}]}, ConfigError, "colour"),
])
def test_bad_configs_are_named(tmp_path, change, error, named):
    with pytest.raises(error, match=named):
        RLConfig.from_dict(config("m", tmp_path, **change))


def test_bfcl_and_udhr_prompt_sets_with_their_rewards(tokenizer):
    train = build_prompts(PromptSource.BFCL, {"categories": ["multiple"]}, Split.TRAIN, size=400, seed=0)
    held = build_prompts(PromptSource.BFCL, {"categories": ["multiple"]}, Split.HELDOUT, size=400, seed=0)
    assert train and held and not {r.where for r in train} & {r.where for r in held}
    record = held[0]
    assert "<tools>" in record.system
    reward = build_reward(PromptSetConfig(name="t", source="bfcl", weight=1.0, reward="tool-call"), tokenizer)
    truth = record.target["truth"][0]
    name, args = next(iter(truth.items()))
    right = {"name": name, "arguments": {k: v[0] for k, v in args.items() if v[0] != ""}}
    assert reward(record.prompt, "<tool_call>" + json.dumps([right]) + "</tool_call>", record.target) == 1.0
    assert reward(record.prompt, "<tool_call>" + json.dumps([{**right, "name": "nope"}]) + "</tool_call>",
                  record.target) == 0.0
    udhr = build_prompts(PromptSource.UDHR, {"kinds": ["translate"], "languages": ["de"]}, Split.HELDOUT, size=3,
                         seed=0)
    chrf = build_reward(PromptSetConfig(name="u", source="udhr", weight=1.0, reward="chrf"), tokenizer)
    assert len(udhr) == 3 and chrf(udhr[0].prompt, udhr[0].target, udhr[0].target) == pytest.approx(1.0)
    with pytest.raises(ConfigError, match="path"):
        build_reward(PromptSetConfig(name="r", source="instructions", weight=1.0, reward="reward-model"), tokenizer)


def test_each_set_samples_within_its_own_budget(tmp_path, base):
    sets = [{"name": "short", "source": "instructions", "weight": 1.0, "reward": "letters", "pool": 8,
             "max_new_tokens": 2},
            {"name": "long", "source": "instructions", "weight": 1.0, "reward": "letters", "pool": 8,
             "options": {"most": 2}}]
    run = RLRun(RLConfig.from_dict(config(base, tmp_path / "run", prompt_sets=sets, prompts_per_step=6,
                                          max_new_tokens=7)))
    drawn = run.mixture.draw(0, 6)
    assert {s for s, _ in drawn} == {0, 1}
    prompts = [render(run.tokenizer, r) for _, r in drawn]
    rows = run.sample(drawn, prompts, run.step)
    k = run.config.rloo.k
    for n, row in enumerate(rows):
        s = drawn[n // k][0]
        assert row.prompt == prompts[n // k]
        assert len(row.response) <= (2 if s == 0 else 7)
    assert max(len(r.response) for n, r in enumerate(rows) if drawn[n // k][0] == 1) > 2


def test_a_tool_round_set_samples_both_turns_and_scores_them(tmp_path, tokenizer):
    model = make_tiny("smollm2-tiny", vocab_size=tokenizer.vocab_size, max_seq_len=2048)
    save_checkpoint(tmp_path / "base", model.config, model.state_dict(), tokenizer)
    sets = [{"name": "tools", "source": "tool-rounds", "weight": 1.0, "reward": "tool-round", "pool": 40}]
    run = RLRun(RLConfig.from_dict(config(str(tmp_path / "base"), tmp_path / "run", prompt_sets=sets,
                                          prompts_per_step=6)))
    drawn = run.mixture.draw(0, 6)
    assert {r.target["turn"] for _, r in drawn} == {"call", "answer"}
    prompts = [render(run.tokenizer, r) for _, r in drawn]
    answer = next(p for p, (_, r) in zip(prompts, drawn, strict=True) if r.history)
    assert tokenizer.decode(answer).count("<tool_call>") == 2          # the format in the tools prompt, and the call
    rows = run.sample(drawn, prompts, run.step)
    rewards = [run.reward(*drawn[n // run.config.rloo.k], row) for n, row in enumerate(rows)]
    assert len(rewards) == 6 * run.config.rloo.k and all(0.0 <= x <= 1.0 for x in rewards)
