"""Attach a vision tower to a frozen decoder (report §5.1, stage 3) and train it to answer about images.

The decoder (SmolLM2 by default) stays frozen: its text behaviour cannot change, so held-out text perplexity
is identical by construction (measured anyway, in benchmarks/vlm.py), and the decoder-side weights need no
shipping. Only the tower (encoder + adapter) learns, from the loss on the answer tokens.

Each example is rendered exactly as a session renders it: the chat template around "question\\n<image>",
the image's tokens spliced in at the marker, the answer and <|im_end|> after "assistant\\n". The part
before the image (system prompt, question) is the same for every example of a task, so it runs once, without
gradients, into a `PrefixKV`; each step runs only image tokens + answer through the decoder, and the output
head only at answer positions (the head is a fifth of SmolLM2's weights).
"""

from __future__ import annotations

import dataclasses
import enum
import math
import random
import time
from pathlib import Path

import torch
import torch.nn.functional as F
from tqdm import tqdm

from openafm.errors import ConfigError
from openafm.io import atomic_write
from openafm.models.image_views import Resolution, image_views
from openafm.models.vlm import IMAGE_PLACEHOLDER, VisionTower, image_marker, split_markers
from openafm.nn.kv import FreshKV, KeyLayout, LayerKV
from openafm.runtime.conversation import Conversation
from openafm.train.vision.mix import ResolutionMix
from openafm.train.vision.questions import QuestionSource
from openafm.train.vision.tasks import QA, Task, is_correct, is_refusal


class EncoderTraining(str, enum.Enum):
    """Whether the tower's encoder learns in this stage (the adapter always does)."""
    TRAINED = "trained"      # at encoder_lr in the answer phase, at lr in the alignment warm-up
    FROZEN = "frozen"        # kept as it comes (e.g. after a reading phase, whose features the warm-up's lr
                             # would otherwise overwrite); no gradients flow into it


@dataclasses.dataclass(frozen=True, kw_only=True)
class VLMTrainConfig:
    steps: int = 150
    batch: int = 8                      # examples per rapid-mode step (9 image tokens each)
    lr: float = 2e-3
    encoder_lr: float = 5e-4            # the encoder moves slower than the fresh adapter
    encoder: EncoderTraining = EncoderTraining.TRAINED
    warmup: int = 10
    weight_decay: float = 0.01
    align_steps: int = 100              # contrastive warm-up against the decoder's embeddings (align_loss)
    align_batch: int = 32
    align_temperature: float = 0.05
    task_weights: tuple[tuple[Task, float], ...] = ((Task.NAME_EMOJI, 0.25), (Task.READ_WORD, 0.3),
                                                    (Task.READ_DIGIT, 0.15), (Task.CHART_VALUE, 0.15),
                                                    (Task.COUNT, 0.15))
    mix: ResolutionMix = ResolutionMix(low_rapid=0.75, balanced_of_rest=1.0)   # see resolution_note
    seed: int = 0

    @property
    def resolution_note(self) -> str:
        return ("CPU budget: rapid 75% (the report's coin flip gives 50%) and the others all balanced (no high draws): "
                "a balanced example costs 16x a rapid one's image tokens through the decoder and a high one 80x; "
                "high mode runs the same tower on five views at inference")


class PrefixKV(FreshKV):
    """A forward that continues a fixed prefix: each layer attends to the prefix's keys (constants, computed
    once) followed by the new tokens' keys. The prefix K/V come from `capture`."""

    def __init__(self, prefix: dict[int, LayerKV], batch: int):
        super().__init__()
        self.prefix, self.batch = prefix, batch

    @staticmethod
    def capture(model, ids: torch.Tensor) -> dict[int, LayerKV]:
        """Run ids [1, P] through the model (no gradients) and keep every owner layer's K/V."""
        kept: dict[int, LayerKV] = {}

        class Keep(FreshKV):
            def write(self, layer, spec, k, v):
                kv = super().write(layer, spec, k, v)
                kept[layer] = kv
                return kv
        with torch.no_grad():
            model(ids, cache=Keep(), positions=torch.arange(ids.shape[1]).expand_as(ids))
        return kept

    def write(self, layer, spec, k, v) -> LayerKV:
        p = self.prefix[layer]
        b = k.shape[0]
        kv = LayerKV(torch.cat([p.k.expand(b, -1, -1, -1), k], 2), torch.cat([p.v.expand(b, -1, -1, -1), v], 2),
                     torch.cat([p.k_pos.expand(b, -1), self._positions], 1), KeyLayout.PREFIX)
        self._by_layer[layer] = kv
        return kv


@dataclasses.dataclass
class Rendered:
    prefix: list[int]         # tokens before the image (system prompt, question)
    suffix: list[int]         # tokens after it, up to "assistant\n"


def render(tokenizer, task: Task) -> Rendered:
    """The session's rendering of [question, image] (fm.prompt joins components with a newline)."""
    text = tokenizer.apply_chat_template([{"role": "user", "content": f"{task.question}\n{image_marker(0)}"}],
                                         add_generation_prompt=True)
    before, _, after = split_markers(text)
    return Rendered(tokenizer.encode(before), tokenizer.encode(after))


class VLMTrainer:
    """Trains `tower` against a frozen `decoder` on image question-answer pairs."""

    def __init__(self, decoder, tokenizer, tower: VisionTower, config: VLMTrainConfig):
        self.decoder, self.tokenizer, self.tower, self.config = decoder, tokenizer, tower, config
        decoder.requires_grad_(False).eval()
        self.eos = sorted(tokenizer.eos_token_ids)[0]
        self.rendered = {t: render(tokenizer, t) for t, _ in config.task_weights}
        self.prefix_kv = {t: PrefixKV.capture(decoder, torch.tensor([r.prefix])) for t, r in self.rendered.items()}
        groups = [{"params": list(tower.adapter.parameters()), "lr": config.lr}]
        if config.encoder is EncoderTraining.FROZEN:
            tower.encoder.requires_grad_(False)
        else:
            groups.append({"params": list(tower.encoder.parameters()), "lr": config.encoder_lr})
        self.opt = torch.optim.AdamW(groups, weight_decay=config.weight_decay)
        learning = [p for p in tower.parameters() if p.requires_grad]
        self.align_opt = torch.optim.AdamW(learning, lr=config.lr, weight_decay=config.weight_decay)
        self.rng = random.Random(config.seed)

    def loss(self, batch: list[QA], mode: Resolution) -> torch.Tensor:
        """Mean cross-entropy of the answer tokens (and <|im_end|>) of one task's batch in one mode."""
        task = batch[0].task
        r = self.rendered[task]
        sizes = self.tower.config.sizes
        views = torch.cat([image_views(q.image, mode, sizes) for q in batch])            # [B * n, 3, S, S]
        _, _, per_view = sizes.plan(mode)
        img = self.tower(views, per_view).reshape(len(batch), -1, self.decoder.config.dim)   # [B, n_img, D]
        answers = [self.tokenizer.encode(q.answer) + [self.eos] for q in batch]
        length = max(len(a) for a in answers)
        n_img, p = img.shape[1], len(r.prefix)
        body = [IMAGE_PLACEHOLDER] * n_img + r.suffix
        ids = torch.tensor([body + a + [self.eos] * (length - len(a)) for a in answers])   # [B, L]
        labels = torch.full_like(ids, -100)
        for i, a in enumerate(answers):                 # position j predicts token j + 1
            start = len(body) - 1
            labels[i, start:start + len(a)] = torch.tensor(a)
        x = torch.cat([img, self.decoder.embed(ids[:, n_img:])], 1)                        # [B, L, D]
        positions = torch.arange(p, p + ids.shape[1]).expand_as(ids)
        store = PrefixKV(self.prefix_kv[task], len(batch))
        x, ctx = self.decoder.begin(ids, store, positions, embeds=x)
        for layer in self.decoder.layers:
            x = layer(x, ctx)
        ctx.store.end(ctx.positions)
        keep = labels != -100                                                             # [B, L]
        h = self.decoder.norm(x[keep])                                                    # [N, D]
        logits = F.linear(h, self.decoder.embed.weight if self.decoder.lm_head is None else self.decoder.lm_head.weight)
        return F.cross_entropy(logits, labels[keep])

    def align_loss(self, batch: list[QA], mode: Resolution, answers: list[str]) -> torch.Tensor:
        """Contrastive alignment to the decoder's own embedding space: the mean image token against the mean
        token embedding of every answer in the pool (InfoNCE over answers, the true one positive)."""
        sizes = self.tower.config.sizes
        views = torch.cat([image_views(q.image, mode, sizes) for q in batch])
        _, _, per_view = sizes.plan(mode)
        img = self.tower(views, per_view).reshape(len(batch), -1, self.decoder.config.dim).mean(1)  # [B, D]
        with torch.no_grad():
            targets = torch.stack([self.decoder.embed(torch.tensor(self.tokenizer.encode(a))).mean(0)
                                   for a in answers])                                              # [K, D]
        logits = F.normalize(img, dim=-1) @ F.normalize(targets, dim=-1).T / self.config.align_temperature
        index = {a: i for i, a in enumerate(answers)}
        return F.cross_entropy(logits, torch.tensor([index[q.answer] for q in batch]))

    def _batch(self, source: QuestionSource, tasks, weights, full: int) -> tuple[list[QA], Resolution]:
        """A task (task_weights), a mode (the resolution mix, per the first image's size) and a batch of it:
        `full` examples in rapid mode, a quarter of that (at least 2) in the others."""
        task = self.rng.choices(tasks, weights)[0]
        first = source.draw(task, 1, self.rng)[0]
        mode = self.config.mix.sample(max(first.image.size), self.rng)
        n = full if mode is Resolution.RAPID else max(2, full // 4)
        return [first] + source.draw(task, n - 1, self.rng), mode

    def _step(self, opt, loss: torch.Tensor) -> None:
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(self.tower.parameters(), 1.0)
        opt.step()

    def train(self, source: QuestionSource, *, log=None, checkpoint: Path | None = None,
              every: int = 50) -> list[dict]:
        """config.align_steps contrastive warm-up steps, then config.steps answer-loss steps; each draws a task,
        a mode and a batch from `source` (questions.FixedPools or FreshQuestions). With `checkpoint`, the state
        (tower, optimizers, sampler, history) is written there every `every` steps and a rerun continues from it.
        Returns one record per step."""
        c = self.config
        tasks, weights = zip(*c.task_weights)
        answers = {t: source.answers(t) for t in tasks}
        done, history = self._resume(checkpoint)
        self.tower.train()
        if c.encoder is EncoderTraining.FROZEN:
            self.tower.encoder.eval()
        total = c.align_steps + c.steps
        bar = tqdm(range(done, total), desc="vlm", disable=log is None, initial=done, total=total)
        for step in bar:
            align = step < c.align_steps
            i, n = (step, c.align_steps) if align else (step - c.align_steps, c.steps)
            scale = min(1.0, (i + 1) / c.warmup) * (1.0 if align else 0.5 * (1 + math.cos(math.pi * i / n)))
            opt = self.align_opt if align else self.opt
            for g, base in zip(opt.param_groups, (c.lr, c.encoder_lr) if not align else (c.lr,)):
                g["lr"] = base * scale
            batch, mode = self._batch(source, tasks, weights, c.align_batch if align else c.batch)
            t0 = time.perf_counter()
            loss = self.align_loss(batch, mode, answers[batch[0].task]) if align else self.loss(batch, mode)
            self._step(opt, loss)
            history.append({"step": step, "phase": "align" if align else "answer", "task": batch[0].task.value,
                            "mode": mode.value, "loss": loss.item(), "seconds": time.perf_counter() - t0})
            bar.set_postfix(loss=f"{loss.item():.3f}", phase=history[-1]["phase"], mode=mode.value)
            if checkpoint is not None and ((step + 1) % every == 0 or step + 1 == total):
                self._save(checkpoint, step + 1, history)
        self.tower.eval()
        return history

    def _save(self, path: Path, done: int, history: list[dict]) -> None:
        state = {"done": done, "history": history, "tower": self.tower.state_dict(), "opt": self.opt.state_dict(),
                 "align_opt": self.align_opt.state_dict(), "rng": self.rng.getstate(),
                 "torch_rng": torch.get_rng_state(), "config": repr(self.config)}
        atomic_write(path, lambda tmp: torch.save(state, tmp))     # a kill leaves the old checkpoint or this one

    def _resume(self, path: Path | None) -> tuple[int, list[dict]]:
        if path is None or not path.is_file():
            return 0, []
        state = torch.load(path, weights_only=False)
        if state["config"] != repr(self.config):
            raise ConfigError(f"{path} was written by a run with another config; delete it to start over\n"
                              f"  it: {state['config']}\n  now: {self.config!r}")
        self.tower.load_state_dict(state["tower"])
        self.opt.load_state_dict(state["opt"])
        self.align_opt.load_state_dict(state["align_opt"])
        self.rng.setstate(state["rng"])
        torch.set_rng_state(state["torch_rng"])
        return state["done"], state["history"]


@dataclasses.dataclass
class Answered:
    correct: int
    total: int
    refused: int                            # replies that refuse (is_refusal), right or wrong
    seconds_to_first_token: list[float]     # per question: image encoding + prefill + the first token
    replies: list[tuple[str, str]]          # (answer, reply), the first few

    @property
    def accuracy(self) -> float:
        return self.correct / self.total if self.total else float("nan")

@torch.no_grad()
def retrieval_accuracy(decoder, tokenizer, tower: VisionTower, qas: list[QA], mode: Resolution,
                       answers: list[str]) -> float:
    """Zero-shot classification in the decoder's embedding space: is the answer whose mean token embedding is
    nearest (cosine) to the image's mean token the right one? (What the alignment warm-up trains; no decoding.)"""
    targets = F.normalize(torch.stack([decoder.embed(torch.tensor(tokenizer.encode(a))).mean(0) for a in answers]),
                          dim=-1)                                                        # [K, D]
    hits = 0
    for q in qas:
        img = F.normalize(tower.embed_image(q.image, mode).mean(0), dim=-1)              # [D]
        hits += answers[int((targets @ img).argmax())] == q.answer
    return hits / len(qas)


def answer_questions(decoder, tokenizer, tower: VisionTower, qas: list[QA], mode: Resolution,
                     max_new_tokens: int = 8) -> Answered:
    """Greedy answers through the inference path a session uses (Conversation with the image spliced in)."""
    out = Answered(0, 0, 0, [], [])
    for q in qas:
        text = tokenizer.apply_chat_template([{"role": "user", "content": f"{q.task.question}\n{image_marker(0)}"}],
                                             add_generation_prompt=True)
        before, _, after = split_markers(text)
        start = time.perf_counter()
        first = []
        conv = Conversation(decoder, tokenizer)
        with torch.inference_mode():
            conv.append_text(before)
            conv.append_image(tower.embed_image(q.image, mode), image_marker(0))
            conv.append_text(after)
            reply = conv.generate(max_new_tokens=max_new_tokens,
                                  on_token=lambda e: first or first.append(time.perf_counter() - start)).text
        out.seconds_to_first_token.append(first[0] if first else float("nan"))
        out.total += 1
        out.correct += is_refusal(reply) if q.absent else is_correct(q.answer, reply)
        out.refused += is_refusal(reply)
        if len(out.replies) < 6:
            out.replies.append((q.answer, reply))
    return out
