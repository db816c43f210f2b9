"""Stop strings over streamed text: find them, and hold back text that might be the start of one."""

from __future__ import annotations


class StopMatcher:
    def __init__(self, stops: list[str] | tuple[str, ...]):
        for s in stops:
            if not isinstance(s, str) or not s:
                raise ValueError(f"stop strings must be non-empty strings, got {s!r}")
        self.stops = list(stops)

    def find(self, text: str, search_from: int = 0) -> int | None:
        """The index where the earliest stop string starts in text (looking from search_from), or None."""
        hits = [i for s in self.stops if (i := text.find(s, max(0, search_from - len(s) + 1))) >= 0]
        return min(hits) if hits else None

    def safe_length(self, text: str) -> int:
        """How much of text can be shown: all but a tail that is a proper prefix of some stop string."""
        hold = 0
        for s in self.stops:
            for n in range(min(len(s) - 1, len(text)), hold, -1):
                if text.endswith(s[:n]):
                    hold = n
                    break
        return len(text) - hold
