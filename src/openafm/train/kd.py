"""Knowledge distillation (report §4: the on-device model is distilled from the MoE teacher): KL divergence
from the teacher's next-token distribution to the student's, mixed with cross-entropy on the labels.

    loss = kd_weight * KL + (1 - kd_weight) * CE          (both means over labelled tokens)

    full:   KL_t = tau^2 * sum_v p_T(v) [log p_T(v) - log p_S(v)]         p = softmax(logits / tau) over V
    top-k:  KL_t = tau^2 * sum_{v in K} q_T(v) [log q_T(v) - log p_S(v)]  K = the teacher's k most likely
            tokens, q_T = p_T renormalised over K, p_S the student's full softmax (not renormalised), so
            the student is also pushed to put its mass on K. Storing k (index, logit) pairs per token is
            what makes offline teacher logits affordable at a 150K vocabulary.

tau^2 keeps gradient sizes comparable across temperatures (Hinton et al., 2015).
"""

from __future__ import annotations

import enum

import torch
from torch.nn import functional as F

from openafm.errors import ConfigError
from openafm.train.batch_protocol import IGNORE_INDEX
from openafm.train.objective import at_least_fp32, cross_entropy, forward_logits, labelled_tokens


class KDKind(str, enum.Enum):
    FULL = "full"
    TOP_K = "top-k"


def kd_divergence(student: torch.Tensor, teacher: torch.Tensor, labels: torch.Tensor, *, kind: KDKind,
                  top_k: int | None = None, temperature: float = 1.0) -> torch.Tensor:
    """Mean per-token KL(teacher || student) over labels != IGNORE_INDEX. student, teacher [B, T, V]; labels [B, T]."""
    tau = temperature
    log_s = F.log_softmax(at_least_fp32(student) / tau, dim=-1)                       # [B, T, V]
    t = at_least_fp32(teacher) / tau
    if kind is KDKind.FULL:
        log_t = F.log_softmax(t, dim=-1)                                       # [B, T, V]
        per_token = (log_t.exp() * (log_t - log_s)).sum(-1)                    # [B, T]
    elif kind is KDKind.TOP_K:
        if top_k is None or not 1 <= top_k <= t.shape[-1]:
            raise ConfigError(f"top-k distillation needs 1 <= top_k <= vocab ({t.shape[-1]}), got {top_k}")
        top_logits, top_idx = t.topk(top_k, dim=-1)                            # [B, T, K]
        log_q = F.log_softmax(top_logits, dim=-1)                              # [B, T, K]
        per_token = (log_q.exp() * (log_q - log_s.gather(-1, top_idx))).sum(-1)  # [B, T]
    else:
        raise ConfigError(f"unknown distillation kind {kind!r}; accepted: {[k.value for k in KDKind]}")
    mask = labels != IGNORE_INDEX                                              # [B, T]
    return tau * tau * (per_token * mask).sum() / max(int(mask.sum()), 1)


class KDObjective:
    """Distil `teacher` (a frozen model, run under no_grad) into the trained model."""

    def __init__(self, teacher: torch.nn.Module, *, kind: KDKind = KDKind.FULL, top_k: int | None = None,
                 temperature: float = 1.0, kd_weight: float = 1.0):
        if not 0.0 <= kd_weight <= 1.0:
            raise ConfigError(f"kd_weight={kd_weight} must be in [0, 1] (1 = pure distillation, 0 = pure CE)")
        if temperature <= 0:
            raise ConfigError(f"temperature={temperature} must be positive")
        if kind is KDKind.TOP_K and (top_k is None or top_k < 1):
            raise ConfigError(f"kind=top-k needs top_k >= 1, got {top_k}")
        if kind is KDKind.FULL and top_k is not None:
            raise ConfigError(f"top_k={top_k} is only used with kind=top-k, not kind=full")
        self.teacher = teacher.eval().requires_grad_(False)
        self.kind, self.top_k, self.temperature, self.kd_weight = kind, top_k, temperature, kd_weight

    def __call__(self, model, batch):
        with torch.no_grad():
            teacher_logits = forward_logits(self.teacher, batch)               # [B, T, V]
        logits = forward_logits(model, batch)                                  # [B, T, V]
        if logits.shape != teacher_logits.shape:
            raise ConfigError(f"student logits {tuple(logits.shape)} and teacher logits "
                              f"{tuple(teacher_logits.shape)} differ: distillation needs the same vocabulary")
        kl = kd_divergence(logits, teacher_logits, batch.labels, kind=self.kind, top_k=self.top_k,
                           temperature=self.temperature)
        ce = cross_entropy(logits, batch.labels)
        loss = self.kd_weight * kl + (1 - self.kd_weight) * ce
        return loss, {"kl": float(kl.detach()), "ce": float(ce.detach())}

    def weight(self, batch) -> int:
        return labelled_tokens(batch)
