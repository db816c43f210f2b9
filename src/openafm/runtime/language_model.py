"""`LanguageModel`: a loaded model and its tokenizer, with generation over text (prompts in, text out)."""

from __future__ import annotations

from typing import Callable

from openafm.checkpoint.load import LoadedModel
from openafm.models.build import ModelConfig
from openafm.runtime.draft import DraftModel
from openafm.runtime.generate import Generation, GenerationStats, TokenEvent, generate_tokens
from openafm.runtime.kv_cache import KVStorage
from openafm.runtime.proposers import ProposerKind
from openafm.runtime.sampling import SamplingParams


class LanguageModel(LoadedModel):
    """A loaded model and its tokenizer, with text in and text out (`openafm.load` returns one)."""

    @classmethod
    def of(cls, loaded: LoadedModel) -> LanguageModel:
        return cls(loaded.model, loaded.tokenizer, name=loaded.name, source=loaded.source, sampling=loaded.sampling)

    @property
    def config(self) -> ModelConfig:
        return self.model.config

    def encode(self, text: str) -> list[int]:
        return self._need_tokenizer().encode(text)

    def chat_prompt(self, messages: list[dict] | str, system: str | None = None) -> str:
        """Messages (or one user message) -> the prompt text of the model's chat template."""
        if isinstance(messages, str):
            messages = [{"role": "user", "content": messages}]
        if system is not None:
            messages = [{"role": "system", "content": system}, *messages]
        return self._need_tokenizer().apply_chat_template(messages, add_generation_prompt=True)

    def generate(self, prompt: str | list[str], *, max_tokens: int = 128, temperature: float = 0.0,
                 top_k: int | None = None, top_p: float | None = None, seed: int | None = None,
                 stop: list[str] | tuple[str, ...] = (), on_token: Callable[[TokenEvent], None] | None = None,
                 stats: GenerationStats | None = None, kv_storage: KVStorage = KVStorage.NATIVE,
                 **speculative) -> str | list[str]:
        """Continue the prompt text (or each of a list of prompts, decoded together by the engine). Returns text
        (or a list). kv_storage=KVStorage.INT8 keeps the KV cache in int8 (see runtime.kv_cache).
        speculate=ProposerKind.NGRAM: prompt-lookup guesses; draft=DraftModel (runtime.draft), gamma=: a draft's
        guesses (both verified in the engine's step: the output is unchanged; `stats` counts them)."""
        prompts = [prompt] if isinstance(prompt, str) else list(prompt)
        outs = self.generate_detailed(prompts, max_tokens=max_tokens, temperature=temperature, top_k=top_k,
                                      top_p=top_p, seed=seed, stop=stop, on_token=on_token, stats=stats,
                                      kv_storage=kv_storage, **speculative)
        texts = [o.text for o in outs]
        return texts[0] if isinstance(prompt, str) else texts

    def chat(self, messages: list[dict] | str, *, system: str | None = None, **kwargs) -> str:
        """One assistant reply to a conversation (list of {'role', 'content'}) or to one user message."""
        return self.generate(self.chat_prompt(messages, system), **kwargs)

    def generate_detailed(self, prompts: list[str], *, max_tokens: int = 128, temperature: float = 0.0,
                          top_k: int | None = None, top_p: float | None = None, seed: int | None = None,
                          stop: list[str] | tuple[str, ...] = (), on_token=None,
                          stats: GenerationStats | None = None,
                          kv_storage: KVStorage = KVStorage.NATIVE, speculate: ProposerKind | None = None,
                          draft: DraftModel | None = None, gamma: int = 4) -> list[Generation]:
        tok = self._need_tokenizer()
        sampling = SamplingParams(temperature=temperature, top_k=top_k, top_p=top_p, seed=seed)
        ids = [tok.encode(p) for p in prompts]
        if speculate is None:
            speculate = ProposerKind.DRAFT if draft is not None else ProposerKind.OFF
        return generate_tokens(self.model, ids, max_new_tokens=max_tokens, sampling=sampling,
                               eos_token_ids=set(tok.eos_token_ids), stop=list(stop), tokenizer=tok,
                               on_token=on_token, stats=stats, kv_storage=kv_storage, speculate=speculate,
                               draft=draft, gamma=gamma)

    def _need_tokenizer(self):
        if self.tokenizer is None:
            raise ValueError(f"model {self.name!r} has no tokenizer (vocab {self.model.kv_plan.vocab_size}); pass token "
                             f"ids to openafm.runtime.generate.generate_tokens instead")
        return self.tokenizer
