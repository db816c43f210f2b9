"""Stage 1: HTML -> main text with trafilatura (boilerplate, navigation and markup removed).

Documents whose ``meta["format"]`` is ``"html"`` are extracted (tables kept as text, comments dropped,
``favor_recall`` because the inputs are documentation pages whose main text is most of the page); others
pass unchanged. A page with no main text is dropped as ``no-main-text``.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import replace

import trafilatura

from openafm.data.document import Document
from openafm.data.pipeline.stage import Drop, Stage


def extract_main_text(html: str) -> str | None:
    return trafilatura.extract(html, include_comments=False, include_tables=True, favor_recall=True)


class ExtractStage(Stage):
    name = "extract"

    def process(self, doc: Document, counts: Counter) -> Document | Drop:
        if doc.meta.get("format") != "html":
            counts["not-html"] += 1
            return doc
        text = extract_main_text(doc.text)
        if not text or not text.strip():
            return Drop("no-main-text")
        counts["html-extracted"] += 1
        counts["html-bytes-in"] += len(doc.text.encode())
        counts["text-bytes-out"] += len(text.encode())
        return replace(doc, text=text.strip(), meta={**doc.meta, "format": "text", "extracted_from": "html"})
