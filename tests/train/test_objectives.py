"""LM and KD objectives against the formulas, computed by naive per-token loops."""

import math

import pytest
import torch

from openafm.errors import ConfigError
from openafm.train.kd import KDKind, KDObjective, kd_divergence
from openafm.train.objective import LMObjective, cross_entropy
from openafm.train.synthetic import SyntheticBatch
from openafm.models.build import build_model
from openafm.models.presets import get_preset
from tiny import make_tiny

V = 11


def _logits_labels(seed=0, b=2, t=5):
    g = torch.Generator().manual_seed(seed)
    logits = torch.randn(b, t, V, generator=g, dtype=torch.float64) * 2
    labels = torch.randint(0, V, (b, t), generator=g)
    labels[0, 1] = labels[1, 4] = -100
    return logits, labels


def _naive_ce(logits, labels):
    total, n = 0.0, 0
    for i in range(labels.shape[0]):
        for j in range(labels.shape[1]):
            y = int(labels[i, j])
            if y == -100:
                continue
            row = logits[i, j].tolist()
            total += math.log(sum(math.exp(x) for x in row)) - row[y]
            n += 1
    return total / n


def _softmax(row, tau=1.0):
    z = [math.exp(x / tau) for x in row]
    s = sum(z)
    return [x / s for x in z]


def _naive_kl(student, teacher, labels, tau, top_k=None):
    total, n = 0.0, 0
    for i in range(labels.shape[0]):
        for j in range(labels.shape[1]):
            if int(labels[i, j]) == -100:
                continue
            ps = _softmax(student[i, j].tolist(), tau)
            pt = _softmax(teacher[i, j].tolist(), tau)
            support = range(len(pt)) if top_k is None else sorted(range(len(pt)), key=lambda v: -pt[v])[:top_k]
            mass = sum(pt[v] for v in support)
            total += sum(pt[v] / mass * (math.log(pt[v] / mass) - math.log(ps[v])) for v in support)
            n += 1
    return tau * tau * total / n


def test_cross_entropy_matches_naive_loop_and_ignores_minus_100():
    logits, labels = _logits_labels()
    assert float(cross_entropy(logits, labels)) == pytest.approx(_naive_ce(logits, labels), rel=1e-12)


def test_cross_entropy_of_a_batch_without_labels_is_zero_not_nan():
    logits, labels = _logits_labels()
    assert float(cross_entropy(logits, torch.full_like(labels, -100))) == 0.0


@pytest.mark.parametrize("tau", [1.0, 2.0])
def test_full_kd_matches_formula(tau):
    s, labels = _logits_labels(0)
    t, _ = _logits_labels(1)
    got = kd_divergence(s, t, labels, kind=KDKind.FULL, temperature=tau)
    assert float(got) == pytest.approx(_naive_kl(s, t, labels, tau), rel=1e-10)


@pytest.mark.parametrize("k", [1, 3, V])
def test_top_k_kd_matches_formula(k):
    s, labels = _logits_labels(2)
    t, _ = _logits_labels(3)
    got = kd_divergence(s, t, labels, kind=KDKind.TOP_K, top_k=k, temperature=1.5)
    assert float(got) == pytest.approx(_naive_kl(s, t, labels, 1.5, top_k=k), rel=1e-10)


def test_kd_of_identical_distributions_is_zero():
    s, labels = _logits_labels(4)
    assert float(kd_divergence(s, s.clone(), labels, kind=KDKind.FULL)) == pytest.approx(0.0, abs=1e-12)


def _batch(b=2, t=12, vocab=512, seed=0):
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(0, vocab, (b, t), generator=g)
    labels = torch.roll(ids, -1, 1)
    labels[:, -1] = -100
    pos = torch.arange(t).expand(b, t)
    return SyntheticBatch(input_ids=ids, labels=labels, positions=pos, segment_ids=torch.zeros_like(ids))


def test_lm_objective_is_ce_of_the_model_logits_and_weights_by_labelled_tokens():
    model, batch = make_tiny("smollm2-tiny"), _batch()
    loss, metrics = LMObjective()(model, batch)
    expected = _naive_ce(model(batch.input_ids, positions=batch.positions).double(), batch.labels)
    assert float(loss.detach()) == pytest.approx(expected, rel=1e-5)
    assert metrics["ce"] == pytest.approx(float(loss.detach()))
    assert LMObjective().weight(batch) == 2 * 11


@pytest.mark.parametrize("kd_weight", [0.0, 0.3, 1.0])
def test_kd_objective_mixes_kl_and_ce_by_weight(kd_weight):
    student, teacher, batch = make_tiny("smollm2-tiny", seed=0), make_tiny("smollm2-tiny", seed=1), _batch()
    objective = KDObjective(teacher, kind=KDKind.TOP_K, top_k=5, temperature=2.0, kd_weight=kd_weight)
    loss, metrics = objective(student, batch)
    s = student(batch.input_ids, positions=batch.positions).double()
    t = teacher(batch.input_ids, positions=batch.positions).double()
    # the model runs in fp32, the reference in fp64 from the same logits
    kl = _naive_kl(s, t, batch.labels, 2.0, top_k=5)
    assert metrics["kl"] == pytest.approx(kl, rel=1e-3)
    ce = _naive_ce(s, batch.labels)
    assert metrics["ce"] == pytest.approx(ce, rel=1e-5)
    assert float(loss.detach()) == pytest.approx(kd_weight * metrics["kl"] + (1 - kd_weight) * metrics["ce"], rel=1e-6)
    assert not any(p.requires_grad for p in teacher.parameters())


def test_kd_objective_rejects_bad_settings():
    teacher = make_tiny("smollm2-tiny")
    with pytest.raises(ConfigError, match="kd_weight=1.5"):
        KDObjective(teacher, kd_weight=1.5)
    with pytest.raises(ConfigError, match="top_k"):
        KDObjective(teacher, kind=KDKind.TOP_K)
    with pytest.raises(ConfigError, match="top_k=4 is only used"):
        KDObjective(teacher, kind=KDKind.FULL, top_k=4)


@pytest.mark.parametrize("preset", ["smollm2-tiny", "afm-server-tiny"])
def test_lm_objective_runs_the_head_on_labelled_positions_only_with_the_full_heads_loss_and_gradients(preset):
    torch.manual_seed(0)
    model, batch = build_model(get_preset(preset)).double(), _batch(t=16, vocab=256)
    batch.labels[0, :10] = -100                     # an SFT row: the prompt carries no label
    batch.labels[1, 3:7] = -100
    sparse, _ = LMObjective()(model, batch)
    sparse.backward()
    grads = {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}
    model.zero_grad()
    full = cross_entropy(model(batch.input_ids, positions=batch.positions), batch.labels)
    full.backward()
    assert float(sparse) == pytest.approx(float(full), rel=1e-12)
    assert grads.keys() == {n for n, p in model.named_parameters() if p.grad is not None}
    for n, p in model.named_parameters():
        if p.grad is not None:
            torch.testing.assert_close(grads[n], p.grad, rtol=1e-10, atol=1e-12)
    batch.labels[:] = -100                          # nothing labelled: 0 with a gradient path
    empty, _ = LMObjective()(model, batch)
    assert float(empty) == 0.0 and empty.requires_grad
