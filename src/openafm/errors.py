"""Typed errors. Each names the bad value and what would have been accepted."""

from __future__ import annotations


class OpenAFMError(Exception):
    """Base class of every error openafm raises on purpose."""


class ConfigError(OpenAFMError, ValueError):
    """A configuration value is invalid (names the key, the value and what is accepted)."""


class UnknownModelError(OpenAFMError, KeyError):
    """A model name is neither a preset, a packaged model nor a checkpoint path."""

    def __init__(self, name: str, available: list[str]):
        self.name, self.available = name, available
        super().__init__(name)

    def __str__(self) -> str:
        return (f"unknown model {self.name!r}: not a preset, a packaged model or an existing checkpoint path. "
                f"Available names: {', '.join(self.available)}")


class CheckpointError(OpenAFMError, ValueError):
    """A checkpoint file is missing, truncated, corrupt or of an unsupported kind (names the file)."""


class ContextWindowExceededError(OpenAFMError, ValueError):
    """A prompt (plus requested new tokens) does not fit the model's context window."""

    def __init__(self, prompt_tokens: int, context_window: int, max_new_tokens: int = 0):
        self.prompt_tokens, self.context_window, self.max_new_tokens = prompt_tokens, context_window, max_new_tokens
        super().__init__(prompt_tokens, context_window, max_new_tokens)

    def __str__(self) -> str:
        need = self.prompt_tokens + self.max_new_tokens
        extra = f" + {self.max_new_tokens} new tokens = {need}" if self.max_new_tokens else ""
        return (f"prompt of {self.prompt_tokens} tokens{extra} exceeds the context window of "
                f"{self.context_window} tokens")


class SamplingOptionError(OpenAFMError, ValueError):
    """An invalid sampling option (names the option, its value and the accepted range)."""


class UnknownTaskError(OpenAFMError, KeyError):
    """An evaluation task name that no task in the registry has (lists the known ones)."""

    def __init__(self, name: str, available: list[str]):
        self.name, self.available = name, available
        super().__init__(name)

    def __str__(self) -> str:
        return f"unknown evaluation task {self.name!r}; known tasks: {', '.join(self.available)}"


class MissingTaskDataError(OpenAFMError, RuntimeError):
    """An evaluation task's data package is not installed (names the package and the install command)."""

    def __init__(self, task: str, package: str, install: str, detail: str = ""):
        self.task, self.package, self.install = task, package, install
        super().__init__(task, package, install, detail)
        self.detail = detail

    def __str__(self) -> str:
        extra = f" ({self.detail})" if self.detail else ""
        return f"task {self.task!r} needs the package {self.package}, which is not installed{extra}: {self.install}"


class MissingTokenizerError(OpenAFMError, ValueError):
    """A model without a tokenizer was given to something that reads or writes text."""

    def __init__(self, model: str, needed_by: str):
        self.model, self.needed_by = model, needed_by
        super().__init__(model, needed_by)

    def __str__(self) -> str:
        return (f"model {self.model!r} has no tokenizer, and {self.needed_by} works on text; use a packaged model, "
                f"a .gguf file or a checkpoint directory with tokenizer.json")
