"""`openafm reward train|score` end to end on a tiny model with the real tokenizer; the cached-prefix fit against
the model's own forward; the saved reward model's scores equal to the trained model's after loading; a policy
tokenizer or base weights that differ refused with typed errors; --resume."""

from __future__ import annotations

import copy
import json

import pytest
import torch

import openafm
from openafm.checkpoint.fingerprint import weights_fingerprint
from openafm.checkpoint.native import save_checkpoint
from openafm.checkpoint.packaged import DEFAULT_MODEL
from openafm.cli import main
from openafm.errors import CheckpointError
from openafm.rl.preference.fit import FitConfig, RewardData, fit, prefix_features, score_features, top_forward
from openafm.rl.preference.model import Level, PreferencePair, RewardModel, TokenizerMismatchError, score_texts
from openafm.rl.preference.pairs import GradedPair, Source, write_pairs
from openafm.rl.preference.saved import load_reward_model, save_reward_model
from openafm.rl.preference.training import prepare, spearman
from openafm.rl.rewards.registry import make_reward
from openafm.splits import Split
from openafm.train.config import Precision
from tiny import make_tiny


def _pairs() -> list[GradedPair]:
    out = []
    for i in range(8):
        a, b = i + 2, i + 3
        right, wrong = f"{a} + {b} = {a + b}.\nAnswer: {a + b}", f"{a} + {b} = {a + b + 1}.\nAnswer: {a + b + 1}"
        plain = f"{a} + {b} = {a + b}."
        split = Split.HELDOUT if i >= 6 else Split.TRAIN
        prompt = f"Calculate {a} + {b}."
        for (c, gc, vc), (r, gr, vr), level in [((right, 2, 1.0), (plain, 1, 0.0), Level.SLIGHTLY_BETTER),
                                                ((right, 2, 1.0), (wrong, 0, 0.0), Level.SIGNIFICANTLY_BETTER),
                                                ((plain, 1, 0.0), (wrong, 0, 0.0), Level.BETTER)]:
            out.append(GradedPair(Source.MATH, f"g{i}", split, PreferencePair(prompt, c, r, level, gc, gr),
                                  "test", vc, vr))
    return out


@pytest.fixture(scope="module")
def base(tiny_checkpoint):
    return tiny_checkpoint


def test_reward_train_and_score_end_to_end(tmp_path, base, tokenizer, capsys):
    write_pairs(tmp_path / "pairs.jsonl", _pairs())
    out = tmp_path / "rm"
    args = ["reward", "train", str(out), "--model", base, "--pairs", str(tmp_path / "pairs.jsonl"), "--epochs", "3",
            "--train-layers", "2", "--batch-prompts", "2", "--precision", "float32", "--checkpoint-every", "1", "--quiet"]
    assert main(args) == 0
    assert "reward model: 18 training pairs, held-out pairwise accuracy math" in capsys.readouterr().out
    summary = json.loads((out / "summary.json").read_text())
    assert summary["train_pairs"] == 18 and summary["train_responses"] == 18 and summary["judged_pairs"] == 6
    assert summary["judged_on"] == "heldout" and summary["pair_accuracy_interval"]["all"]["n"] == 6
    assert set(summary["pair_accuracy"]) == {"math", "all"} and summary["verifier_order_pairs"] == {"math": 4}
    assert len((out / "metrics.jsonl").read_text().splitlines()) == 9            # 3 epochs x 3 steps

    scorer = load_reward_model(out, policy_tokenizer=tokenizer)
    reward = make_reward("reward-model", scorer=scorer)
    text = "2 + 3 = 5.\nAnswer: 5"
    assert reward("Calculate 2 + 3.", text, None) == scorer("Calculate 2 + 3.", text)
    assert main(["reward", "score", str(out), "--prompt", "Calculate 2 + 3.", "--response", "5"]) == 0
    assert float(capsys.readouterr().out) == pytest.approx(scorer("Calculate 2 + 3.", "5"), abs=1e-5)

    assert main(args) == 2                                                      # a checkpoint exists: --resume
    assert "pass --resume" in capsys.readouterr().err
    before = (out / "reward_model.safetensors").read_bytes()
    assert main([*args, "--resume"]) == 0                                       # at step 9 of 9: the same model
    after = load_reward_model(out)
    assert after.score(["Calculate 2 + 3."], ["5"]) == scorer.score(["Calculate 2 + 3."], ["5"])
    assert len(before) == len((out / "reward_model.safetensors").read_bytes())


def test_cached_prefix_fit_matches_the_full_forward_and_saved_scores_round_trip(tmp_path, base, tokenizer):
    lm = openafm.load(base)
    fingerprint = weights_fingerprint(lm.model)
    torch.manual_seed(0)
    model = RewardModel(lm.model, 3)
    pairs = _pairs()
    prepared = prepare(model, tokenizer, pairs, train_layers=1, precision=Precision.FLOAT32)
    config = FitConfig(train_layers=1, epochs=2, batch_prompts=3, precision="float32", head_lr=1e-2)
    records = fit(model, prepared.split, prepared.train_features, prepared.train, config)
    assert len(records) == 4 and records[-1]["loss"] < records[0]["loss"]
    texts = prepared.train.texts
    full = score_texts(model, tokenizer, [p for p, _ in texts], [r for _, r in texts])
    cached = score_features(model, prepared.split, prepared.train_features, precision="float32")
    assert cached.tolist() == pytest.approx(full, abs=1e-5)
    scores, grades = top_forward(model, 0, prefix_features(model, tokenizer, texts[:2], 0, precision="float32"))
    assert scores.tolist() == pytest.approx(full[:2], abs=1e-5) and grades.shape == (2, 3)

    save_reward_model(tmp_path, model, prepared.split, base_name=base, base_fingerprint=fingerprint,
                      tokenizer=tokenizer, settings=config.to_dict())
    loaded = load_reward_model(tmp_path)
    assert loaded.score([p for p, _ in texts], [r for _, r in texts]) == full          # bit-identical

    other = copy.deepcopy(tokenizer)
    other.chat_template = "{{ messages }}"
    with pytest.raises(TokenizerMismatchError, match="chat template"):
        load_reward_model(tmp_path, policy_tokenizer=other)
    with pytest.raises(TokenizerMismatchError, match="chat template"):
        loaded.check_policy(other)
    different = make_tiny("smollm2-tiny", seed=1, vocab_size=tokenizer.vocab_size, max_seq_len=512)
    save_checkpoint(tmp_path / "other", different.config, different.state_dict(), tokenizer)
    with pytest.raises(CheckpointError, match="trained on base weights sha256:"):
        load_reward_model(tmp_path, base=str(tmp_path / "other"))
    with pytest.raises(CheckpointError, match="no reward model"):
        load_reward_model(tmp_path / "nowhere")


def test_a_response_with_two_grades_is_refused():
    a = PreferencePair("p", "x", "y", Level.BETTER, 2, 1)
    b = PreferencePair("p", "x", "z", Level.BETTER, 1, 0)
    with pytest.raises(ValueError, match="has grades 2 and 1"):
        RewardData.from_pairs([a, b])


def test_spearman_against_the_closed_form():
    # no ties: 1 - 6 sum d^2 / (n (n^2 - 1)); ranks [1, 2, 3, 4] vs [2, 1, 4, 3]: d^2 = 4 -> 1 - 24 / 60
    assert spearman([1.0, 2.0, 3.0, 4.0], [0.2, 0.1, 0.9, 0.5]) == pytest.approx(0.6)
    assert spearman([1.0, 2.0], [3.0, 3.0]) is None


def test_an_interrupted_fit_resumes_to_the_same_weights(tmp_path, base, tokenizer):
    def run(stop_first: bool) -> dict:
        torch.manual_seed(0)
        model = RewardModel(openafm.load(base).model, 3)
        prepared = prepare(model, tokenizer, _pairs(), train_layers=1, precision=Precision.FLOAT32)
        config = FitConfig(train_layers=1, epochs=2, batch_prompts=2, precision="float32", checkpoint_every=100)
        run_dir = tmp_path / f"run{stop_first}"
        run_dir.mkdir()
        if stop_first:
            assert len(fit(model, prepared.split, prepared.train_features, prepared.train, config, run_dir=run_dir,
                           stop_after=4)) == 4
            with pytest.raises(CheckpointError, match="pass --resume"):
                fit(model, prepared.split, prepared.train_features, prepared.train, config, run_dir=run_dir)
            torch.manual_seed(0)
            model = RewardModel(openafm.load(base).model, 3)               # a fresh process: a fresh model
        records = fit(model, prepared.split, prepared.train_features, prepared.train, config, run_dir=run_dir,
                      resume=True)
        assert [r["step"] for r in records] == list(range(5 if stop_first else 1, 7))
        return model.state_dict()

    whole, resumed = run(False), run(True)
    assert all(torch.equal(whole[k], resumed[k]) for k in whole)


@pytest.mark.real_model
def test_on_the_default_model_the_cached_prefix_and_the_saved_file_give_the_full_forward(tmp_path):
    lm = openafm.load(DEFAULT_MODEL, weights="float32")
    fingerprint = weights_fingerprint(lm.model)
    torch.manual_seed(0)
    model = RewardModel(lm.model, 3)
    torch.nn.init.normal_(model.score_head.weight, std=0.1)              # a head that reads something
    texts = [("Calculate 2 + 3.", "2 + 3 = 5.\nAnswer: 5"), ("Calculate 2 + 3.", "2 + 3 = 6.\nAnswer: 6")]
    full = score_texts(model, lm.tokenizer, [p for p, _ in texts], [r for _, r in texts])
    split = len(model.trunk.layers) - 2
    cached, _ = top_forward(model, split, prefix_features(model, lm.tokenizer, texts, split, precision="float32"))
    assert cached.tolist() == pytest.approx(full, abs=1e-4)
    save_reward_model(tmp_path, model, split, base_name=DEFAULT_MODEL, base_fingerprint=fingerprint,
                      tokenizer=lm.tokenizer, settings={})
    scorer = load_reward_model(tmp_path, policy_tokenizer=lm.tokenizer)
    assert scorer.score([p for p, _ in texts], [r for _, r in texts]) == full
