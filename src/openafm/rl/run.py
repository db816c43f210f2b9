"""A synchronous RLOO run over a mixture of prompt sets (`openafm rl CONFIG.yaml`): each step draws P prompts from
the sets by weight, samples k responses per prompt from the policy, rewards each with its set's reward, shapes the
rewards with the KL to the frozen reference, and takes one optimizer step on rloo.py's clipped loss, accumulated
over micro-batches of rows. Metrics go to RUN/metrics.jsonl line by line; checkpoints use the trainer's atomic
format, so a killed run resumes bit-exactly (same samples, same updates); RUN/policy/ is the final policy as a
native checkpoint (what `openafm eval --model` and `openafm.load` read) and RUN/rl.json the run's summary. With
`adapter` set, only a LoRA adapter on the frozen model trains (rl/adapter_policy.py) and RUN/adapter.safetensors holds
it as well (what a package stage ships); RUN/policy/ is then the adapter merged into the model.

    run = RLRun(config)           # loads the policy, copies the frozen reference, builds prompt pools and rewards
    summary = run.run(resume=True)

Metrics per step: reward (all rows) and reward/<set>, kl (sampled KL(pi_old || pi_ref) per response), loss,
response_tokens, entropy (mean per sampled token), clip_fraction, ratio, grad_norm, step_s; every heldout.every
steps (and at 0 and the end) heldout/<set>: the greedy mean reward on the set's held-out slice.
"""

from __future__ import annotations

import copy
import json
import time
from pathlib import Path

import numpy as np
import torch
from tqdm import tqdm

from openafm.checkpoint.adapter import ADAPTER_FILE
from openafm.checkpoint.load import load_model
from openafm.checkpoint.native import save_checkpoint
from openafm.errors import CheckpointError
from openafm.rl.adapter_policy import adapt_policy, save_adapter_policy
from openafm.rl.config import RESUMABLE_CHANGES, RLConfig
from openafm.rl.prompts import PromptRecord, build_prompts
from openafm.rl.rewards.registry import RewardFn
from openafm.rl.rloo import Normalisation, group, leave_one_out_advantages, rloo_loss, sequence_kl, shaped_rewards
from openafm.rl.rollout import (Row, forward_logprobs, greedy_rows, micro_batches, pack_rows, row_logprobs,
                               sample_rows)
from openafm.rl.set_rewards import build_reward
from openafm.splits import Split
from openafm.train import checkpoint as ckpt
from openafm.train import rng
from openafm.train.config import incompatible_keys
from openafm.train.metrics import MetricsLog
from openafm.train.optimizer import build_optimizer, clip_gradients
from openafm.train.precision import autocast

METRICS_FILE, SUMMARY_FILE, POLICY_DIR = "metrics.jsonl", "rl.json", "policy"


class PromptMixture:
    """Each step's prompts: counts per set from a multinomial seeded by (seed, step), each set walking a seeded
    permutation of its pool epoch after epoch. Its state is the position in each set's walk."""

    def __init__(self, pools: list[list[PromptRecord]], weights: list[float], seed: int):
        self.pools, self.seed = pools, seed
        self.weights = np.asarray(weights, dtype=np.float64) / sum(weights)
        self.positions = [0] * len(pools)

    def draw(self, step: int, n: int) -> list[tuple[int, PromptRecord]]:
        counts = np.random.default_rng([self.seed, step]).multinomial(n, self.weights)
        out = []
        for s, count in enumerate(counts):
            pool = self.pools[s]
            for _ in range(int(count)):
                epoch, i = divmod(self.positions[s], len(pool))
                order = np.random.default_rng([self.seed, s, epoch]).permutation(len(pool))
                out.append((s, pool[int(order[i])]))
                self.positions[s] += 1
        return out

    def state_dict(self) -> dict:
        return {"positions": list(self.positions)}

    def load_state_dict(self, state: dict) -> None:
        if len(state["positions"]) != len(self.pools):
            raise CheckpointError(f"the checkpoint's mixture has {len(state['positions'])} prompt sets, this run "
                                  f"{len(self.pools)}")
        self.positions = list(state["positions"])


def render(tokenizer, record: PromptRecord) -> list[int]:
    """The prompt as a session feeds it: [system,] user turn[, the turns after it], then the generation prompt."""
    turns = ([{"role": "system", "content": record.system}] if record.system is not None else []) + \
        [{"role": "user", "content": record.prompt}, *record.history]
    return tokenizer.encode(tokenizer.apply_chat_template(turns, add_generation_prompt=True))


class RLRun:
    def __init__(self, config: RLConfig):
        self.config = config
        self.run_dir = Path(config.run_dir)
        self.device = torch.device(config.device)
        rng.seed_everything(config.seed)
        lm = load_model(config.model, seed=config.seed)
        if lm.tokenizer is None or lm.tokenizer.chat_template is None:
            raise ValueError(f"RL model {config.model!r} has no tokenizer with a chat template; prompts are chat turns")
        self.tokenizer = lm.tokenizer
        model = lm.model.to(self.device)
        # the base's fingerprint, which the adapter file records (None: every weight trains)
        self.fingerprint = adapt_policy(model, config.adapter) if config.adapter is not None else None
        self.policy = model if config.adapter is not None else model.requires_grad_(True)
        self.reference = copy.deepcopy(self.policy).requires_grad_(False).eval()
        self.ema = copy.deepcopy(self.policy).requires_grad_(False).eval() if config.ema is not None else None
        self.optimizer = build_optimizer(self.policy, config.optimizer)
        sets = config.prompt_sets
        self.rewards: list[RewardFn] = [build_reward(s, self.tokenizer) for s in sets]
        self.mixture = PromptMixture([self._pool(i, Split.TRAIN, s.pool) for i, s in enumerate(sets)],
                                     [s.weight for s in sets], config.seed)
        self.heldout = [self._pool(i, Split.HELDOUT, config.heldout.size) if config.heldout.size else []
                        for i in range(len(sets))]
        self.eos = frozenset(self.tokenizer.eos_token_ids)
        self.step = 0

    def _pool(self, index: int, split: Split, size: int) -> list[PromptRecord]:
        s = self.config.prompt_sets[index]
        pool = build_prompts(s.source, s.options, split, size=size, seed=self.config.seed + index)
        if split is Split.TRAIN and not pool:
            raise ValueError(f"prompt set {s.name!r}: the train pool is empty")
        return pool

    # --- one step ------------------------------------------------------------------------------------------

    def autocast(self):
        return autocast(self.config.precision, self.device)

    def train_step(self) -> dict:
        c, start = self.config, time.perf_counter()
        drawn = self.mixture.draw(self.step, c.prompts_per_step)
        prompts = [render(self.tokenizer, record) for _, record in drawn]
        self.policy.eval()
        rows = self.sample(drawn, prompts, self.step)
        sets = [s for s, _ in drawn for _ in range(c.rloo.k)]
        rewards = torch.tensor([self.reward(s, drawn[n // c.rloo.k][1], row)
                                for n, (s, row) in enumerate(zip(sets, rows))])
        tokens, mask = pack_rows(rows)
        tokens, mask = tokens.to(self.device), mask.to(self.device)
        with self.autocast():
            old = row_logprobs(self.policy, tokens, mask, temperature=c.temperature, micro_batch=c.micro_batch)
            ref = row_logprobs(self.reference, tokens, mask, temperature=c.temperature, micro_batch=c.micro_batch)
        seq_kl = sequence_kl(old, ref, mask)                                        # [N]
        shaped = shaped_rewards(rewards.to(self.device), seq_kl, c.rloo.kl_coef)
        advantages = leave_one_out_advantages(group(shaped, c.rloo.k)).reshape(-1)
        metrics = self.update(tokens, mask, old, advantages)
        self.step += 1
        out = {"step": self.step, "reward": float(rewards.mean()), "kl": float(seq_kl.mean()),
               "response_tokens": float(mask.sum(-1).mean()), **metrics}
        for i, s in enumerate(c.prompt_sets):
            mine = [float(r) for r, k in zip(rewards, sets) if k == i]
            if mine:
                out[f"reward/{s.name}"] = sum(mine) / len(mine)
        out["step_s"] = time.perf_counter() - start
        return out

    def budget(self, set_index: int) -> int:
        return self.config.prompt_sets[set_index].max_new_tokens or self.config.max_new_tokens

    def sample(self, drawn: list[tuple[int, PromptRecord]], prompts: list[list[int]], step: int) -> list[Row]:
        """k rows per prompt in prompt order, seeded by `step`; prompts of one response budget are sampled as one
        batch. (The asynchronous generators call it with their batch's number as the step.)"""
        c, k = self.config, self.config.rloo.k
        rows: list[Row | None] = [None] * (len(prompts) * k)
        for batch_index, budget in enumerate(sorted({self.budget(s) for s, _ in drawn})):
            mine = [p for p, (s, _) in enumerate(drawn) if self.budget(s) == budget]
            sampled = sample_rows(self.policy, [prompts[p] for p in mine], k=k, max_new_tokens=budget,
                                  temperature=c.temperature, seed=c.seed * 100_003 + step + batch_index * 1_000_033,
                                  eos_token_ids=self.eos, batch=max(c.micro_batch, k))
            for j, p in enumerate(mine):
                rows[p * k:(p + 1) * k] = sampled[j * k:(j + 1) * k]
        return rows

    def reward(self, set_index: int, record: PromptRecord, row: Row) -> float:
        text = self.tokenizer.decode(row.text_ids)
        return float(self.rewards[set_index](record.prompt, text, record.target))

    def update(self, tokens: torch.Tensor, mask: torch.Tensor, old: torch.Tensor, advantages: torch.Tensor) -> dict:
        """One optimizer step on rloo_loss over the rows (old: the sampling policy's log-probs) -> its metrics."""
        c = self.config
        self.policy.train()
        self.optimizer.zero_grad(set_to_none=True)
        n_rows, n_tokens = tokens.shape[0], mask.sum().clamp(min=1)
        sums = {"loss": 0.0, "clip_fraction": 0.0, "ratio": 0.0, "entropy": 0.0}
        for rows, width in micro_batches(mask.cpu(), c.micro_batch):
            rows = rows.to(tokens.device)
            part_mask = mask[rows, :width - 1]                                   # [n, width - 1]
            with self.autocast():
                logprobs, entropy = forward_logprobs(self.policy, tokens[rows, :width], c.temperature)
            loss, m = rloo_loss(logprobs, old[rows, :width - 1], advantages[rows], part_mask, clip=c.rloo.clip,
                                normalisation=c.rloo.normalisation)
            share = (part_mask.sum() / n_tokens if c.rloo.normalisation is Normalisation.TOKEN_MEAN
                     else torch.tensor(len(rows) / n_rows))
            (loss * share).backward()
            token_share = float(part_mask.sum() / n_tokens)
            sums["loss"] += float(loss.detach() * share)
            sums["clip_fraction"] += m["clip_fraction"] * token_share
            sums["ratio"] += m["ratio"] * token_share
            sums["entropy"] += float((entropy * part_mask).sum() / n_tokens)
        sums["grad_norm"] = clip_gradients(self.policy.parameters(), c.optimizer.grad_clip)
        self.optimizer.step()
        self.policy.eval()
        if self.ema is not None:
            with torch.no_grad():
                for e, p in zip(self.ema.parameters(), self.policy.parameters()):
                    e.lerp_(p, 1 - c.ema)
        return sums

    # --- held-out evaluation -------------------------------------------------------------------------------

    @torch.no_grad()
    def evaluate(self, model=None) -> dict[str, float]:
        """Greedy mean reward on each set's held-out slice: {heldout/<set>: value}."""
        model = model if model is not None else (self.ema if self.ema is not None else self.policy)
        c, out = self.config, {}
        for i, s in enumerate(c.prompt_sets):
            records = self.heldout[i]
            if not records:
                continue
            rows = greedy_rows(model, [render(self.tokenizer, r) for r in records],
                               max_new_tokens=c.heldout.max_new_tokens or self.budget(i), eos_token_ids=self.eos,
                               batch=max(c.micro_batch, 8))
            scores = [self.reward(i, r, row) for r, row in zip(records, rows)]
            out[f"heldout/{s.name}"] = sum(scores) / len(scores)
        return out

    # --- checkpoints and the loop --------------------------------------------------------------------------

    def save(self, loader_state: dict | None = None) -> Path:
        """A training checkpoint at self.step; loader_state: what resumes the prompts (default: the mixture's)."""
        state = ckpt.TrainingState(
            step=self.step, model_config=self.policy.config, model=self.policy.state_dict(),
            optimizer=self.optimizer.state_dict(), schedule={}, rng=rng.capture(),
            loader=self.mixture.state_dict() if loader_state is None else loader_state, config=self.config.to_dict(),
            path=None, hooks={"ema": self.ema.state_dict()} if self.ema is not None else {})
        return ckpt.save_training_checkpoint(self.run_dir, state, keep=self.config.checkpoint.keep)

    def restore_latest(self, load_loader=None) -> int:
        """Load the newest checkpoint, if any (load_loader(state): restores what save's loader_state saved;
        default: the mixture). -> its step (0 when there is none)."""
        ckpt.remove_partial(self.run_dir)
        path = ckpt.latest_checkpoint(self.run_dir)
        if path is None:
            return 0
        state = ckpt.load_training_checkpoint(path)
        diff = incompatible_keys(state.config, self.config.to_dict(), RESUMABLE_CHANGES)
        if diff:
            raise CheckpointError(f"{path}: written by an incompatible RL config; differing keys: " + "; ".join(diff))
        self.policy.load_state_dict(state.model)
        self.optimizer.load_state_dict(state.optimizer)
        (load_loader or self.mixture.load_state_dict)(state.loader)
        if self.ema is not None:
            self.ema.load_state_dict(state.hooks["ema"])
        rng.restore(state.rng)
        self.step = state.step
        return self.step

    def run(self, *, resume: bool = False, stop_after: int | None = None) -> dict:
        """Train to config.steps (stop_after: return after that many steps, as a kill would). -> the summary."""
        c = self.config
        if not resume and ckpt.latest_checkpoint(self.run_dir) is not None:
            raise CheckpointError(f"{self.run_dir} already holds checkpoints; resume (--resume) or use a new run_dir")
        start = self.restore_latest() if resume else 0
        self.run_dir.mkdir(parents=True, exist_ok=True)
        log = MetricsLog(self.run_dir / METRICS_FILE, keep_through_step=start if resume else None)
        before = _read_summary(self.run_dir).get("heldout_before") if start else None
        if before is None:
            before = self.evaluate(self.reference)
            log.write({"step": 0, **before})
            (self.run_dir / SUMMARY_FILE).write_text(json.dumps({"heldout_before": before}, indent=2) + "\n")
        bar = tqdm(total=c.steps, initial=start, desc="rl", unit="step", disable=not c.progress)
        after = None
        try:
            while self.step < c.steps and (stop_after is None or self.step < start + stop_after):
                record = self.train_step()
                if self.step % c.heldout.every == 0 or self.step == c.steps:
                    after = self.evaluate()
                    record.update(after)
                log.write(record)
                bar.update(1)
                bar.set_postfix(reward=f"{record['reward']:.3f}", kl=f"{record['kl']:.3f}")
                if self.step % c.checkpoint.every == 0 or self.step == c.steps:
                    self.save()
        finally:
            bar.close()
            log.close()
        if self.step < c.steps:
            return {"stopped_at": self.step}
        return self.finish(before, after if after is not None else self.evaluate())

    def finish(self, before: dict, after: dict) -> dict:
        final = self.ema if self.ema is not None else self.policy
        extra = {"rl_steps": self.step, "base_model": self.config.model}
        adapter = {}
        if self.fingerprint is None:
            save_checkpoint(self.run_dir / POLICY_DIR, final.config, final.state_dict(), tokenizer=self.tokenizer,
                            extra=extra)
        else:
            save_adapter_policy(self.run_dir / ADAPTER_FILE, self.run_dir / POLICY_DIR, final, self.tokenizer,
                                base_name=self.config.model, fingerprint=self.fingerprint, extra=extra)
            adapter = {"adapter": str(self.run_dir / ADAPTER_FILE), "base_fingerprint": self.fingerprint}
        summary = {"model": self.config.model, "steps": self.step, "policy": str(self.run_dir / POLICY_DIR), **adapter,
                   "heldout_before": before, "heldout_after": after,
                   "heldout_gain": {k: after[k] - before[k] for k in after}}
        (self.run_dir / SUMMARY_FILE).write_text(json.dumps(summary, indent=2) + "\n")
        return summary


def _read_summary(run_dir: Path) -> dict:
    path = run_dir / SUMMARY_FILE
    return json.loads(path.read_text()) if path.is_file() else {}
