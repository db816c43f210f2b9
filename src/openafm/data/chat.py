"""Chat examples for supervised fine-tuning: one user turn (after an optional system turn) and the assistant turn to
learn, with where each came from.

A JSONL file of them has one object per line, {"prompt": str, "response": str}, optionally "system": str (the
system turn before the user's: the tools prompt of a tool-calling request, instructions; without it the chat
template writes its default, as a session without instructions does) and "meta": an object of provenance (what
`openafm synth` records: the prompt's source, the verifier, the acceptance rate), kept on the example and never
trained on; any other line (bad JSON, another key, a value that is not a non-empty string, a meta that is not an
object) is an error naming file:line. `openafm.train.sft` renders them with the model's chat template and trains
on the assistant turn only.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

from openafm.io import JsonlError, read_jsonl

KEYS = ("prompt", "response")
OPTIONAL = ("system", "meta")


@dataclasses.dataclass(frozen=True)
class ChatExample:
    prompt: str          # the user turn
    response: str        # the assistant turn (the only tokens with a loss)
    where: str = ""      # where it came from, for messages: "file.jsonl:12", "guided train seed 0 #7"
    meta: dict | None = dataclasses.field(default=None, compare=False)   # provenance, as the file gives it
    system: str | None = None   # the system turn before the user's (None: the chat template's default)

    def messages(self) -> list[dict]:
        """The chat turns: the system turn (only when the example has one), the user turn, the assistant turn."""
        system = [{"role": "system", "content": self.system}] if self.system is not None else []
        return system + [{"role": "user", "content": self.prompt}, {"role": "assistant", "content": self.response}]

    def to_dict(self) -> dict:
        """The example as a JSONL line reads back (read_chat_jsonl); `where` is not written."""
        out = {"prompt": self.prompt, "response": self.response}
        if self.system is not None:
            out["system"] = self.system
        if self.meta is not None:
            out["meta"] = self.meta
        return out


def read_chat_jsonl(path: str | Path) -> list[ChatExample]:
    """Every line of `path` as a ChatExample; the first bad line raises JsonlError naming path:line."""
    path = Path(path)
    if not path.is_file():
        raise JsonlError(f"{path}: no such file (a JSONL file of {{\"prompt\", \"response\"}} objects)")
    out = []
    for lineno, obj in enumerate(read_jsonl(path), start=1):
        where = f"{path}:{lineno}"
        extra, missing = sorted(set(obj) - set(KEYS) - set(OPTIONAL)), [k for k in KEYS if k not in obj]
        if extra or missing:
            raise JsonlError(f"{where}: a chat example has exactly the keys {list(KEYS)}; "
                             f"{'missing ' + str(missing) if missing else ''}"
                             f"{' and ' if missing and extra else ''}{'unknown ' + str(extra) if extra else ''} "
                             f"(besides them only {list(OPTIONAL)} are allowed)")
        for key in KEYS + (("system",) if "system" in obj else ()):
            if not isinstance(obj[key], str) or not obj[key]:
                raise JsonlError(f"{where}: {key!r} must be a non-empty string, got {obj[key]!r}")
        if "meta" in obj and not isinstance(obj["meta"], dict):
            raise JsonlError(f"{where}: 'meta' must be an object of provenance, got {obj['meta']!r}")
        out.append(ChatExample(obj["prompt"], obj["response"], where, obj.get("meta"), obj.get("system")))
    if not out:
        raise JsonlError(f"{path}: no examples (the file is empty)")
    return out
