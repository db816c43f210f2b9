"""Every random number generator a training step may draw from: torch (CPU and CUDA), numpy, Python.

`capture()` gives the states as tensors, numbers and lists only, so a training checkpoint loads with
`torch.load(weights_only=True)`: opening a run directory someone hands you cannot run code."""

from __future__ import annotations

import random

import numpy as np
import torch


def seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


def capture() -> dict:
    kind, key, pos, has_gauss, gauss = np.random.get_state()
    version, words, python_gauss = random.getstate()
    state = {"torch": torch.get_rng_state(),
             "numpy": {"kind": kind, "key": torch.from_numpy(key.astype(np.int64)), "pos": int(pos),
                       "has_gauss": int(has_gauss), "gauss": float(gauss)},
             "python": {"version": version, "words": list(words), "gauss": python_gauss}}
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def restore(state: dict) -> None:
    torch.set_rng_state(state["torch"])
    n = state["numpy"]
    np.random.set_state((n["kind"], n["key"].numpy().astype(np.uint32), n["pos"], n["has_gauss"], n["gauss"]))
    p = state["python"]
    random.setstate((p["version"], tuple(p["words"]), p["gauss"]))
    if "cuda" in state:
        torch.cuda.set_rng_state_all(state["cuda"])
