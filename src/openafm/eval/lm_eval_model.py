"""An lm-evaluation-harness model class on openafm's runtime, registered with lm-eval as "openafm".

Importing this module imports `lm_eval` (the dev extra `lm-eval`; it is imported nowhere else in openafm)
and registers the class, so lm-eval's tasks run on any model `openafm.load` takes:

    import lm_eval, openafm.eval.lm_eval_model                  # registers "openafm"
    lm_eval.simple_evaluate(model="openafm", model_args="pretrained=smollm2-135m-instruct,dtype=float32",
                            tasks=["my_task"], task_manager=lm_eval.tasks.TaskManager(include_path="tasks/"))

The three request kinds of `lm_eval.api.model.LM` go through the same batched code as `openafm eval`
(eval/scoring.py), so a task scored both ways gives the same number:
* `loglikelihood` — (context, continuation) -> (summed log-probability, is it the greedy continuation);
* `loglikelihood_rolling` — a whole text's log-probability after the EOS token, in disjoint windows of
  `max_length` tokens that each see as much earlier text as fits (lm-eval's own window helper);
* `generate_until` — greedy generation up to the request's `until` strings and `max_gen_toks`; sampling
  requests (do_sample or temperature > 0) raise, as nothing here samples.
"""

from __future__ import annotations

from lm_eval.api.model import LM
from lm_eval.api.registry import register_model
from lm_eval.utils import get_rolling_token_windows, make_disjoint_window

from openafm.checkpoint.adapter import attach_adapter, read_adapter
from openafm.checkpoint.load import LoadedModel, load_model
from openafm.checkpoint.packaged import DEFAULT_MODEL
from openafm.errors import MissingTokenizerError
from openafm.eval.scoring import generate_batched, loglikelihoods, score_token_requests

DEFAULT_MAX_LENGTH = 2048       # rolling windows: the model's 8192 would need ~1.6 GB of fp32 logits per window


@register_model("openafm")
class OpenAFMLM(LM):
    def __init__(self, pretrained: str = DEFAULT_MODEL, dtype: str = "float32", adapter: str | None = None,
                 batch_size: int | str = 16, max_length: int = DEFAULT_MAX_LENGTH, max_gen_toks: int = 256,
                 loaded: LoadedModel | None = None, **unused):
        super().__init__()
        if unused.keys() - {"device", "max_batch_size"}:
            raise ValueError(f"openafm lm-eval model: unknown arguments {sorted(unused)}; accepted: pretrained, dtype, "
                             f"adapter, batch_size, max_length, max_gen_toks")
        self.loaded = loaded if loaded is not None else load_model(pretrained, dtype=dtype)
        if adapter:
            self.loaded = LoadedModel(attach_adapter(self.loaded.model, read_adapter(adapter)), self.loaded.tokenizer,
                                      name=f"{self.loaded.name}+adapter", source=adapter)
        if self.loaded.tokenizer is None:
            raise MissingTokenizerError(self.loaded.name, "lm-eval")
        self.batch_size = 16 if str(batch_size).startswith("auto") else int(batch_size)
        self.max_length = min(int(max_length), self.loaded.context_window)
        self.max_gen_toks = int(max_gen_toks)

    @property
    def tokenizer_name(self) -> str:
        return self.loaded.name

    def loglikelihood(self, requests, disable_tqdm: bool = False) -> list[tuple[float, bool]]:
        scores = loglikelihoods(self.loaded.model, self.loaded.tokenizer, [tuple(r.args) for r in requests],
                                batch_size=self.batch_size)
        return [(s.logprob, s.greedy) for s in scores]

    def loglikelihood_rolling(self, requests, disable_tqdm: bool = False) -> list[float]:
        tok = self.loaded.tokenizer
        pieces, owner = [], []
        for k, r in enumerate(requests):
            (text,) = r.args
            for ctx, cont in map(make_disjoint_window, get_rolling_token_windows(
                    tok.encode(text), prefix_token=tok.eos_token_id, max_seq_len=self.max_length, context_len=1)):
                pieces.append((ctx, cont))
                owner.append(k)
        scores = score_token_requests(self.loaded.model, pieces, batch_size=self.batch_size)
        totals = [0.0] * len(requests)
        for k, s in zip(owner, scores):
            totals[k] += s.logprob
        return totals

    def generate_until(self, requests, disable_tqdm: bool = False) -> list[str]:
        groups: dict[tuple, list[int]] = {}
        for i, r in enumerate(requests):
            _, kwargs = r.args
            kwargs = dict(kwargs or {})
            if kwargs.get("do_sample") or float(kwargs.get("temperature", 0) or 0) > 0:
                raise ValueError(f"openafm lm-eval model decodes greedily; request {i} asks for sampling ({kwargs})")
            until = kwargs.get("until") or []
            until = [until] if isinstance(until, str) else list(until)
            groups.setdefault((tuple(until), int(kwargs.get("max_gen_toks", self.max_gen_toks))), []).append(i)
        out = [""] * len(requests)
        for (until, max_tokens), idx in groups.items():
            texts = generate_batched(self.loaded.model, self.loaded.tokenizer, [requests[i].args[0] for i in idx],
                                     max_tokens=max_tokens, stop=list(until), batch_size=self.batch_size)
            for i, text in zip(idx, texts):
                out[i] = text
        return out
