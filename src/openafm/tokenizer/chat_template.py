"""Render a Hugging Face-style Jinja chat template in a sandbox.

The environment matches what transformers gives templates: `trim_blocks`, `lstrip_blocks`, the
`loopcontrols` extension, a `raise_exception(message)` global, a `strftime_now(format)` global and a
`tojson` filter that does not HTML-escape (Jinja's own does).
"""

from __future__ import annotations

import datetime
import functools
import json
from typing import Any, NoReturn

import jinja2
from jinja2.sandbox import ImmutableSandboxedEnvironment

from openafm.tokenizer.errors import ChatTemplateError


def render_chat_template(template: str, messages: list[dict[str, Any]], *, add_generation_prompt: bool,
                         bos_token: str | None, eos_token: str | None, **variables: Any) -> str:
    """The template rendered with `messages`, `add_generation_prompt`, `bos_token`, `eos_token` and
    any further template variables (e.g. `tools`)."""
    try:
        compiled = _compile(template)
        return compiled.render(messages=messages, add_generation_prompt=add_generation_prompt,
                               bos_token=bos_token or "", eos_token=eos_token or "", **variables)
    except ChatTemplateError:
        raise
    except jinja2.TemplateError as e:
        raise ChatTemplateError(f"chat template failed to render: {type(e).__name__}: {e}") from e


@functools.lru_cache(maxsize=8)
def _compile(template: str) -> jinja2.Template:
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=["jinja2.ext.loopcontrols"])
    env.globals["raise_exception"] = _raise_exception
    env.globals["strftime_now"] = _strftime_now
    env.filters["tojson"] = _tojson
    return env.from_string(template)


def _raise_exception(message: str) -> NoReturn:
    raise ChatTemplateError(f"chat template raised: {message}")


def _strftime_now(format: str) -> str:
    return datetime.datetime.now().strftime(format)


def _tojson(value: Any, ensure_ascii: bool = False, indent: int | None = None,
            separators: tuple[str, str] | None = None, sort_keys: bool = False) -> str:
    return json.dumps(value, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)
