"""The reward model: the level-aware preference loss and the grading term against closed forms, the ablation
(grading weight 0) removing the grading term, the score read at the last non-pad token, a tiny model learning a
separable preference in a few steps, and the tokenizer check."""

from __future__ import annotations

import copy
import math

import pytest
import torch
from torch import nn

from openafm.errors import ConfigError
from openafm.rl.preference.model import (
    LEVELS,
    NO_GRADE,
    Level,
    PreferenceBatch,
    PreferenceKind,
    PreferencePair,
    RewardLossConfig,
    RewardModel,
    TokenizerMismatchError,
    check_same_tokenizer,
    collate,
    pair_loss,
    preference_batch,
    preference_loss,
    score_texts,
)
from tiny import make_tiny


def sig(x: float) -> float:
    return 1 / (1 + math.exp(-x))


class FixedScores(nn.Module):
    """A stand-in reward model returning given scores and grade logits."""

    def __init__(self, scores, grade_logits):
        super().__init__()
        self.scores, self.grade_logits = scores, grade_logits

    def forward(self, input_ids, lengths):
        return self.scores, self.grade_logits


def _batch(levels, grades):
    n = 2 * len(levels)
    return PreferenceBatch(torch.zeros(n, 3, dtype=torch.long), torch.full((n,), 3),
                           torch.tensor([LEVELS.index(lv) for lv in levels]), torch.tensor(grades))


def test_loss_against_closed_form():
    # pairs: (chosen 1.0, rejected 0.0, better), (chosen -0.5, rejected 0.5, negligibly better)
    scores = torch.tensor([1.0, -0.5, 0.0, 0.5])
    logits = torch.log(torch.tensor([[1.0, 3.0], [1.0, 1.0], [2.0, 2.0], [1.0, 4.0]]))   # softmax: 3/4, 1/2, 1/2, 4/5
    batch = _batch([Level.BETTER, Level.NEGLIGIBLY_BETTER], [1, NO_GRADE, 0, 1])
    soft = (-(0.85 * math.log(sig(1.0)) + 0.15 * math.log(sig(-1.0)))
            - (0.55 * math.log(sig(-1.0)) + 0.45 * math.log(sig(1.0)))) / 2
    grading = -(math.log(3 / 4) + math.log(1 / 2) + math.log(4 / 5)) / 3          # the ungraded response left out
    loss, metrics = preference_loss(FixedScores(scores, logits), batch, RewardLossConfig(grading_weight=0.3))
    assert float(loss) == pytest.approx(soft + 0.3 * grading, rel=1e-6)
    assert metrics["pair"] == pytest.approx(soft, rel=1e-6) and metrics["grading"] == pytest.approx(grading, rel=1e-6)
    assert metrics["accuracy"] == 0.5 and metrics["margin"] == pytest.approx(0.0)

    margin = (-math.log(sig(1.0 - 2 / 3)) - math.log(sig(-1.0 - 0.0))) / 2
    loss, _ = preference_loss(FixedScores(scores, logits), batch, RewardLossConfig(PreferenceKind.MARGIN, 0.0))
    assert float(loss) == pytest.approx(margin, rel=1e-6)


def test_stronger_levels_cost_more_for_the_same_wrong_order():
    chosen, rejected = torch.zeros(4), torch.ones(4)                      # every pair ranked the wrong way
    for kind in PreferenceKind:
        losses = [float(pair_loss(chosen[:1], rejected[:1], torch.tensor([i]), kind)) for i in range(4)]
        assert losses == sorted(losses, reverse=True) and losses[0] > losses[-1]


def test_grading_weight_zero_is_the_ablation():
    scores = torch.tensor([0.3, -0.2])
    logits = torch.tensor([[5.0, -5.0], [0.0, 0.0]], requires_grad=True)
    batch = _batch([Level.SLIGHTLY_BETTER], [1, 0])
    with_grading, _ = preference_loss(FixedScores(scores, logits), batch, RewardLossConfig(grading_weight=1.0))
    without, metrics = preference_loss(FixedScores(scores, logits), batch, RewardLossConfig(grading_weight=0.0))
    assert float(without) == pytest.approx(float(pair_loss(scores[:1], scores[1:], torch.tensor([2]))))
    assert float(with_grading.detach()) > float(without) + 5 and metrics["grading"] == 0.0
    assert not without.requires_grad or torch.autograd.grad(without, logits, allow_unused=True)[0] is None
    with pytest.raises(ConfigError, match="grading_weight=-1"):
        RewardLossConfig(grading_weight=-1)


def test_score_is_read_at_the_last_non_pad_token():
    model = RewardModel(make_tiny("smollm2-tiny"), n_grades=3)
    torch.nn.init.normal_(model.score_head.weight)
    ids, lengths = collate([[5, 6, 7], [5, 6, 7, 8, 9]], pad_id=0)
    scores, grades = model(ids, lengths)
    alone, _ = model(torch.tensor([[5, 6, 7]]), torch.tensor([3]))
    repadded, _ = model(torch.tensor([[5, 6, 7, 99, 99, 99]]), torch.tensor([3]))
    torch.testing.assert_close(scores[0], alone[0])                      # padding after the last token is ignored
    torch.testing.assert_close(repadded[0], alone[0])
    assert grades.shape == (2, 3)
    with pytest.raises(ValueError, match="lengths"):
        model(ids, torch.tensor([0, 5]))


def test_tiny_model_learns_a_separable_preference():
    torch.manual_seed(0)
    model = RewardModel(make_tiny("smollm2-tiny"), n_grades=2).train()
    # chosen responses end in token 11, rejected in token 22 (the rest random); grades agree with the preference
    g = torch.Generator().manual_seed(0)
    rows = [torch.randint(30, 500, (6,), generator=g).tolist() for _ in range(16)]
    chosen, rejected = [r + [11] for r in rows[:8]], [r + [22] for r in rows[8:]]
    ids, lengths = collate(chosen + rejected, pad_id=0)
    batch = PreferenceBatch(ids, lengths, torch.full((8,), LEVELS.index(Level.BETTER)),
                            torch.tensor([1] * 8 + [0] * 8))
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    first = None
    for _ in range(12):
        loss, metrics = preference_loss(model, batch, RewardLossConfig(grading_weight=0.5))
        first = first if first is not None else metrics
        opt.zero_grad()
        loss.backward()
        opt.step()
    _, after = preference_loss(model, batch, RewardLossConfig(grading_weight=0.5))
    assert first["accuracy"] == 0.0 and first["margin"] == 0.0          # a zero-initialised head: all tied
    floor = -(0.85 * math.log(0.85) + 0.15 * math.log(0.15))            # the soft label's entropy: the least loss
    assert first["pair"] == pytest.approx(math.log(2))
    assert after["accuracy"] == 1.0 and after["margin"] > 1.0 and after["pair"] < floor + 0.05
    held = collate([[40, 41, 42, 43, 11], [40, 41, 42, 43, 22]], pad_id=0)
    with torch.no_grad():
        s, _ = model.eval()(*held)
    assert float(s[0]) > float(s[1])                                     # generalises to an unseen prefix


def test_preference_batch_and_score_texts_use_the_chat_template(tokenizer):
    pairs = [PreferencePair("Say hi", "Hi!", "No.", "significantly-better", 4, 0)]
    batch = preference_batch(pairs, tokenizer)
    chosen = tokenizer.encode(tokenizer.apply_chat_template(
        [{"role": "user", "content": "Say hi"}, {"role": "assistant", "content": "Hi!"}], add_generation_prompt=False))
    assert batch.input_ids[0, :batch.lengths[0]].tolist() == chosen
    assert batch.levels.tolist() == [0] and batch.grades.tolist() == [4, 0]
    model = RewardModel(make_tiny("smollm2-tiny", vocab_size=tokenizer.vocab_size))
    torch.nn.init.normal_(model.score_head.weight)
    s = score_texts(model, tokenizer, ["Say hi", "Say hi"], ["Hi!", "No."])
    direct, _ = model(batch.input_ids, batch.lengths)
    assert s == pytest.approx(direct.tolist(), rel=1e-5)


def test_tokenizer_mismatch_is_a_typed_error(tokenizer):
    check_same_tokenizer(tokenizer, copy.deepcopy(tokenizer))
    other = copy.deepcopy(tokenizer)
    other.chat_template = "{{ messages }}"
    with pytest.raises(TokenizerMismatchError, match="chat template"):
        check_same_tokenizer(tokenizer, other)

    class Shifted:                                   # the same vocabulary size, one token renamed
        def __getattr__(self, name):
            return getattr(tokenizer, name)

        def id_to_token(self, i):
            return "zzz" if i == 1234 else tokenizer.id_to_token(i)
    with pytest.raises(TokenizerMismatchError, match="token 1234"):
        check_same_tokenizer(tokenizer, Shifted())
