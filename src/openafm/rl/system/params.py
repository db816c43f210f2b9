"""The parameter server: the latest published policy weights, by version.

The policy updater puts a copy of the weights into Ray's object store (`ray.put`: one copy, shared by every
reader on the node, moved between nodes by Ray) and hands the ParameterServer actor the reference. Generators
poll `version()` between batches — a few bytes — and pull the weights only when it changed. The reference is
passed inside a list so that Ray hands over the reference itself, not the object.

What is published is the trainable part of the policy: every weight when the whole model trains, only the
LoRA factors when the policy trains a LoRA (everything else is frozen, so the generators already hold it): a
135M model's 538 MB against a rank-16 adapter's few MB.

    kind, weights = publishable(policy)                  # WeightSet.FULL or .TRAINABLE, {name: tensor}
    server.publish(version, [ray.put(weights)], kind)    # (the PU, through the actor)
    version, [ref], kind = server.latest()                # (a TG, when version() moved)
    load_published(model, kind, ray.get(ref))
"""

from __future__ import annotations

import enum
import time

import torch

from openafm.errors import CheckpointError


class WeightSet(str, enum.Enum):
    FULL = "full"                # every weight (the whole policy trains)
    TRAINABLE = "trainable"      # the trainable weights only (a LoRA on a frozen base)


def publishable(model: torch.nn.Module) -> tuple[WeightSet, dict[str, torch.Tensor]]:
    """The weights a generator needs to follow the policy: all when all train, else the trainable ones (copies)."""
    params = dict(model.named_parameters())
    trainable = {n for n, p in params.items() if p.requires_grad}
    if not trainable:
        raise ValueError("the policy has no trainable weights; nothing would ever be published")
    if trainable == set(params):
        return WeightSet.FULL, {n: t.detach().clone() for n, t in model.state_dict().items()}
    return WeightSet.TRAINABLE, {n: params[n].detach().clone() for n in sorted(trainable)}


@torch.no_grad()
def load_published(model: torch.nn.Module, kind: WeightSet, weights: dict[str, torch.Tensor]) -> None:
    if WeightSet(kind) is WeightSet.FULL:
        model.load_state_dict(weights)
        return
    params = dict(model.named_parameters())
    unknown = sorted(set(weights) - set(params))
    if unknown:
        raise CheckpointError(f"published weights name parameters this model lacks: {unknown[:4]} (does the "
                              f"generator's policy carry the same LoRA?)")
    for name, t in weights.items():
        params[name].copy_(t)


class ParameterServer:
    """The latest (version, [weights ref], kind); plain Python, so it runs as an actor or in-process."""

    def __init__(self):
        self._version, self._refs, self._kind, self._at = -1, None, WeightSet.FULL, 0.0
        self.publishes = 0

    def publish(self, version: int, refs: list, kind: WeightSet) -> None:
        if version < self._version:
            raise ValueError(f"publish of version {version} after version {self._version}: versions only grow")
        self._version, self._refs, self._kind, self._at = version, refs, WeightSet(kind), time.time()
        self.publishes += 1

    def version(self) -> int:
        return self._version

    def latest(self) -> tuple[int, list, WeightSet, float]:
        """-> (version, [ref], kind, time.time() of the publish)."""
        if self._refs is None:
            raise RuntimeError("nothing has been published yet")
        return self._version, self._refs, self._kind, self._at
