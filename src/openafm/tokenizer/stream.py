"""`StreamDecoder`: token ids in one at a time, text deltas out, never half a character.

A byte-level token can end in the middle of a UTF-8 character (an emoji is often 2-3 tokens), and
decoding such a prefix gives U+FFFD. The decoder keeps a window of recent ids: `prefix` ids whose text
was already emitted, then ids not yet shown. It decodes the window, and emits the text beyond the
prefix's once it no longer ends in U+FFFD; then the window restarts at the last emitted boundary.
Decoding with the prefix as context keeps decoders that treat the first token specially (leading
space stripping) correct. Concatenated deltas equal `tokenizer.decode(all ids)`.

    stream = StreamDecoder(tokenizer)
    text = "".join(stream.push(i) for i in ids) + stream.flush()
"""

from __future__ import annotations

from openafm.tokenizer.tokenizer import Tokenizer

REPLACEMENT = "\ufffd"


class StreamDecoder:
    def __init__(self, tokenizer: Tokenizer, skip_special_tokens: bool = False):
        self.tokenizer, self.skip_special_tokens = tokenizer, skip_special_tokens
        self._ids: list[int] = []   # the window: already-emitted context, then pending ids
        self._prefix = 0            # how many ids of the window are context whose text was emitted

    def push(self, token_id: int) -> str:
        """Add one token; return the text it completes ('' while a character is still incomplete)."""
        self._ids.append(token_id)
        shown = self._decode(self._ids[:self._prefix])
        text = self._decode(self._ids)
        if len(text) <= len(shown) or text.endswith(REPLACEMENT):
            return ""
        del self._ids[:self._prefix]     # what was context is no longer needed
        self._prefix = len(self._ids)    # everything now in the window has been emitted
        return text[len(shown):]

    def flush(self) -> str:
        """The text still held back (an incomplete character decodes to U+FFFD here); then reset."""
        shown = self._decode(self._ids[:self._prefix])
        text = self._decode(self._ids)
        self._ids, self._prefix = [], 0
        return text[len(shown):]

    def _decode(self, ids: list[int]) -> str:
        return self.tokenizer.decode(ids, skip_special_tokens=self.skip_special_tokens) if ids else ""
