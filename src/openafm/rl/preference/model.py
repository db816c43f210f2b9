"""The reward model of post-training (AFM 2024 §5.1, kept in the 2025 report): the decoder trunk with a scalar head
read at each sequence's last token, trained on human preference pairs with two additions to Bradley-Terry:

    level-aware preference loss   each pair carries how strongly the chosen response is preferred (significantly
        better, better, slightly better, negligibly better). kind soft-label (default; AFM's choice): the target
        probability that chosen beats rejected is the level's soft label p, L = -(p log s(d) + (1 - p) log s(-d))
        with d = r_chosen - r_rejected and s the logistic; kind margin (Llama 2's): L = -log s(d - m_level).
    single-sided grading           each response may also carry an absolute grade (0 .. n_grades - 1, or -1 for
        none); a grading head on the same hidden state is trained by cross-entropy to predict it, weighted by
        grading_weight (0 turns it off: the ablation), a regulariser that anchors the scores of single responses.

The soft labels and margins below are ours (the report gives neither): labels spaced from 0.95 down to 0.55, so a
"negligibly better" pair is nearly a tie; margins Llama 2's "large" scale (1, 2/3, 1/3, 0).

    model = RewardModel(trunk, n_grades=5)
    loss, metrics = preference_loss(model, batch, RewardLossConfig())   # batch: PreferenceBatch.collate(...)
    scores = score_texts(model, tokenizer, prompts, responses)          # [B] floats, for the reward registry

A reward model scores the policy's responses token for token, so its tokenizer must be the policy's:
check_same_tokenizer raises TokenizerMismatchError naming the first difference.
"""

from __future__ import annotations

import dataclasses
import enum
import hashlib
from collections.abc import Sequence

import torch
from torch import nn
from torch.nn import functional as F

from openafm.errors import ConfigError, OpenAFMError
from openafm.models.decoder import Decoder

NO_GRADE = -1


class Level(str, enum.Enum):
    SIGNIFICANTLY_BETTER = "significantly-better"
    BETTER = "better"
    SLIGHTLY_BETTER = "slightly-better"
    NEGLIGIBLY_BETTER = "negligibly-better"


class PreferenceKind(str, enum.Enum):
    SOFT_LABEL = "soft-label"
    MARGIN = "margin"


LEVELS = list(Level)
SOFT_LABELS = {Level.SIGNIFICANTLY_BETTER: 0.95, Level.BETTER: 0.85, Level.SLIGHTLY_BETTER: 0.7,
               Level.NEGLIGIBLY_BETTER: 0.55}
MARGINS = {Level.SIGNIFICANTLY_BETTER: 1.0, Level.BETTER: 2 / 3, Level.SLIGHTLY_BETTER: 1 / 3,
           Level.NEGLIGIBLY_BETTER: 0.0}


class TokenizerMismatchError(OpenAFMError, ValueError):
    """A reward model's tokenizer differs from the policy's (names the first difference)."""


@dataclasses.dataclass(frozen=True)
class RewardLossConfig:
    kind: PreferenceKind = PreferenceKind.SOFT_LABEL
    grading_weight: float = 0.1          # 0: no single-sided grading term

    def __post_init__(self):
        object.__setattr__(self, "kind", PreferenceKind(self.kind))
        if self.grading_weight < 0:
            raise ConfigError(f"grading_weight={self.grading_weight} must be >= 0 (0 turns the grading term off)")


class RewardModel(nn.Module):
    """trunk (a Decoder; its output head is unused) + score head [D -> 1] + optional grading head [D -> n_grades]."""

    def __init__(self, trunk: Decoder, n_grades: int = 0):
        super().__init__()
        if not isinstance(trunk, Decoder):
            raise ConfigError(f"a reward model's trunk must be a Decoder, got {type(trunk).__name__}")
        if n_grades < 0:
            raise ConfigError(f"n_grades={n_grades} must be >= 0 (0: no grading head)")
        self.trunk, self.n_grades = trunk, n_grades
        dim = trunk.config.dim
        self.score_head = nn.Linear(dim, 1)
        nn.init.zeros_(self.score_head.weight)
        nn.init.zeros_(self.score_head.bias)
        self.grade_head = nn.Linear(dim, n_grades) if n_grades else None

    @property
    def config(self):
        return self.trunk.config

    @property
    def kv_plan(self):
        return self.trunk.kv_plan

    def last_hidden(self, input_ids: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        """input_ids [B, T] right-padded, lengths [B] -> the final-norm hidden state at token lengths - 1, [B, D]."""
        if bool((lengths < 1).any()) or bool((lengths > input_ids.shape[1]).any()):
            raise ValueError(f"lengths {lengths.tolist()} must lie in 1..{input_ids.shape[1]}")
        x, ctx = self.trunk.begin(input_ids, None, None)                     # [B, T, D]
        for layer in self.trunk.layers:
            x = layer(x, ctx)
        ctx.store.end(ctx.positions)
        x = self.trunk.norm(x)
        return x[torch.arange(x.shape[0], device=x.device), lengths - 1]     # [B, D]

    def forward(self, input_ids: torch.Tensor, lengths: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor | None]:
        """-> (scores [B], grade logits [B, n_grades] or None)."""
        h = self.last_hidden(input_ids, lengths)
        scores = self.score_head(h.to(self.score_head.weight.dtype)).squeeze(-1)
        grades = self.grade_head(h.to(self.grade_head.weight.dtype)) if self.grade_head is not None else None
        return scores, grades


@dataclasses.dataclass(frozen=True)
class PreferencePair:
    prompt: str
    chosen: str
    rejected: str
    level: Level = Level.BETTER
    chosen_grade: int = NO_GRADE
    rejected_grade: int = NO_GRADE

    def __post_init__(self):
        object.__setattr__(self, "level", Level(self.level))


@dataclasses.dataclass
class PreferenceBatch:
    input_ids: torch.Tensor    # [2P, T] right-padded: rows 0..P-1 the chosen responses, P..2P-1 the rejected
    lengths: torch.Tensor      # [2P] tokens before the padding
    levels: torch.Tensor       # [P] index into LEVELS
    grades: torch.Tensor       # [2P] absolute grade or NO_GRADE

    @property
    def pairs(self) -> int:
        return self.levels.shape[0]


def conversation_ids(tokenizer, prompt: str, response: str) -> list[int]:
    """The user turn and the assistant's response, rendered with the chat template and tokenized."""
    text = tokenizer.apply_chat_template([{"role": "user", "content": prompt},
                                          {"role": "assistant", "content": response}], add_generation_prompt=False)
    return tokenizer.encode(text)


def collate(rows: Sequence[list[int]], pad_id: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Token lists -> (ids [B, T] right-padded to the longest, lengths [B])."""
    t = max(len(r) for r in rows)
    ids = torch.tensor([r + [pad_id] * (t - len(r)) for r in rows], dtype=torch.long)
    return ids, torch.tensor([len(r) for r in rows], dtype=torch.long)


def preference_batch(pairs: Sequence[PreferencePair], tokenizer) -> PreferenceBatch:
    rows = [conversation_ids(tokenizer, p.prompt, p.chosen) for p in pairs]
    rows += [conversation_ids(tokenizer, p.prompt, p.rejected) for p in pairs]
    ids, lengths = collate(rows, tokenizer.pad_token_id or 0)
    grades = [p.chosen_grade for p in pairs] + [p.rejected_grade for p in pairs]
    return PreferenceBatch(ids, lengths, torch.tensor([LEVELS.index(p.level) for p in pairs]),
                           torch.tensor(grades, dtype=torch.long))


def pair_loss(chosen: torch.Tensor, rejected: torch.Tensor, levels: torch.Tensor,
              kind: PreferenceKind = PreferenceKind.SOFT_LABEL) -> torch.Tensor:
    """scores [P] x 2, levels [P] (index into LEVELS) -> the mean level-aware Bradley-Terry loss."""
    d = chosen - rejected                                                          # [P]
    if PreferenceKind(kind) is PreferenceKind.SOFT_LABEL:
        p = torch.tensor([SOFT_LABELS[lv] for lv in LEVELS], dtype=d.dtype, device=d.device)[levels]
        return -(p * F.logsigmoid(d) + (1 - p) * F.logsigmoid(-d)).mean()
    m = torch.tensor([MARGINS[lv] for lv in LEVELS], dtype=d.dtype, device=d.device)[levels]
    return -F.logsigmoid(d - m).mean()


def grading_loss(grade_logits: torch.Tensor | None, grades: torch.Tensor) -> torch.Tensor:
    """grade logits [B, G], grades [B] (NO_GRADE: none) -> mean cross-entropy over the graded responses."""
    graded = grades != NO_GRADE
    if grade_logits is None:
        if bool(graded.any()):
            raise ConfigError("the batch has grades but the reward model has no grading head (n_grades=0)")
        return grades.new_zeros((), dtype=torch.float32)
    if not bool(graded.any()):
        return grade_logits.sum() * 0.0
    return F.cross_entropy(grade_logits[graded].float(), grades[graded])


def preference_loss(model: RewardModel, batch: PreferenceBatch, config: RewardLossConfig = RewardLossConfig()
                    ) -> tuple[torch.Tensor, dict[str, float]]:
    """-> (pair loss + grading_weight * grading loss, metrics: pair, grading, accuracy, margin)."""
    scores, grade_logits = model(batch.input_ids, batch.lengths)                 # [2P], [2P, G]
    p = batch.pairs
    chosen, rejected = scores[:p].float(), scores[p:].float()
    pair = pair_loss(chosen, rejected, batch.levels, config.kind)
    loss = pair
    grading = torch.zeros(())
    if config.grading_weight > 0:
        grading = grading_loss(grade_logits, batch.grades)
        loss = loss + config.grading_weight * grading
    d = (chosen - rejected).detach()
    return loss, {"pair": float(pair.detach()), "grading": float(grading.detach()),
                  "accuracy": float((d > 0).float().mean()), "margin": float(d.mean())}


@torch.no_grad()
def score_texts(model: RewardModel, tokenizer, prompts: Sequence[str], responses: Sequence[str]) -> list[float]:
    """The reward model's score of each (prompt, response)."""
    ids, lengths = collate([conversation_ids(tokenizer, p, r) for p, r in zip(prompts, responses, strict=True)],
                           tokenizer.pad_token_id or 0)
    device = next(model.parameters()).device
    scores, _ = model(ids.to(device), lengths.to(device))
    return scores.float().tolist()


def _vocab_digest(tokenizer) -> str:
    h = hashlib.sha256()
    for i in range(tokenizer.vocab_size):
        h.update(tokenizer.id_to_token(i).encode("utf-8", "surrogatepass") + b"\0")
    return h.hexdigest()


def check_same_tokenizer(reward_tokenizer, policy_tokenizer) -> None:
    """Raise TokenizerMismatchError when the two tokenizers would not give the same ids for the same text."""
    for what in ("vocab_size", "eos_token_ids", "bos_token_id", "pad_token_id"):
        a, b = getattr(reward_tokenizer, what), getattr(policy_tokenizer, what)
        if a != b:
            raise TokenizerMismatchError(f"the reward model's tokenizer has {what}={a!r}, the policy's {b!r}: "
                                         f"train the reward model from the policy's tokenizer")
    if _vocab_digest(reward_tokenizer) != _vocab_digest(policy_tokenizer):
        first = next(i for i in range(reward_tokenizer.vocab_size)
                     if reward_tokenizer.id_to_token(i) != policy_tokenizer.id_to_token(i))
        raise TokenizerMismatchError(f"token {first} is {reward_tokenizer.id_to_token(first)!r} in the reward "
                                     f"model's tokenizer and {policy_tokenizer.id_to_token(first)!r} in the policy's")
    if reward_tokenizer.chat_template != policy_tokenizer.chat_template:
        raise TokenizerMismatchError("the reward model's chat template differs from the policy's: the responses it "
                                     "scores would be rendered differently from those it was trained on")
