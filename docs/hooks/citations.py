"""Checked citations: a number typed in a page agrees with the results file and key it cites.

A guide writes a measured number followed by an HTML comment naming where it comes from:

    decodes at **0.90×**<!-- result: decode_llama_bench.json llama_bench/q4_1/decode_ratio --> llama.cpp's speed

The comment is invisible on the site and on GitHub. The number is the last one before the comment (thousands
commas, a sign, a unit such as ``×`` or ``ms`` and Markdown emphasis may sit between them); it agrees when it
equals the value rounded to as many decimals as were typed, or the value × 100 when typed as a percentage.
As a hook, every disagreement, unknown file or key is a build warning (so ``mkdocs build --strict`` fails);
tests/docs/test_readme.py uses ``agrees`` for the README's table.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass

from results_data import ResultKeyError, at

log = logging.getLogger("mkdocs.hooks.citations")
CITATION = re.compile(r"(?P<number>[+-]?\d[\d,]*(?:\.\d+)?)(?P<percent>%)?(?P<between>[^\d<\n]{0,16}?)"
                      r"<!-- result: (?P<file>\S+\.json) (?P<key>.+?) -->")
ANY_CITATION = re.compile(r"<!-- result:.*?-->")


@dataclass(frozen=True)
class Citation:
    number: str        # as typed, e.g. "1,513" or "+15.2"
    percent: bool
    file: str
    key: str
    line: int


def citations(markdown: str) -> tuple[list[Citation], list[int]]:
    """Every citation of a page, and the lines of citation comments with no number right before them."""
    def line(pos: int) -> int:
        return markdown.count("\n", 0, pos) + 1

    found = {m.end(): Citation(m["number"], bool(m["percent"]), m["file"], m["key"], line(m.start()))
             for m in CITATION.finditer(markdown)}
    orphans = [line(m.start()) for m in ANY_CITATION.finditer(markdown) if m.end() not in found]
    return list(found.values()), orphans


def agrees(typed: str, value, percent: bool = False) -> bool:
    """Whether `typed` ("0.90", "1,513", "+15.2") is `value` rounded to the typed decimals (× 100 if a percent)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return False
    text = typed.replace(",", "").lstrip("+")
    decimals = len(text.split(".", 1)[1]) if "." in text else 0
    shown = value * 100 if percent else value
    return abs(float(text) - shown) <= 0.5 * 10 ** -decimals + 1e-9 * max(1.0, abs(shown))


def problems(markdown: str) -> list[str]:
    """What is wrong with a page's citations, one sentence each."""
    found, orphans = citations(markdown)
    out = [f"line {line}: a result citation without a number right before it" for line in orphans]
    for c in found:
        try:
            value = at(c.file, c.key)
        except (FileNotFoundError, ResultKeyError) as error:
            out.append(f"line {c.line}: {error}")
            continue
        if not agrees(c.number, value, c.percent):
            out.append(f"line {c.line}: {c.number}{'%' if c.percent else ''} does not agree with {c.file} "
                       f"{c.key} = {value!r}")
    return out


def on_page_markdown(markdown, page, config, files):
    for problem in problems(markdown):
        log.warning(f"{page.file.src_uri}: {problem}")
    return markdown
