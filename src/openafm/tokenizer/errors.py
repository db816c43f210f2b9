"""Tokenizer errors. Each names the bad value (token, id, template, tokenizer kind) and what is accepted."""

from __future__ import annotations

from openafm.errors import OpenAFMError


class TokenizerError(OpenAFMError, ValueError):
    """An unsupported tokenizer description, an unknown token or id, or a missing file."""


class ChatTemplateError(TokenizerError):
    """A chat template is missing, fails to render, or raised an error itself (`raise_exception`)."""
