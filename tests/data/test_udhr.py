"""The udhr reader on a two-file package written here (exact texts and fields) and on the installed npm
package when present (counts and known texts)."""

from __future__ import annotations

import pytest

from openafm.data.sources import udhr
from openafm.data.sources.udhr import Unit, read_declaration, udhr_documents

ENG = """<!doctype html>
<html data-code="eng" data-iso6393="eng" dir="ltr" lang="en">
  <head>
    <title>English</title>
  </head>
  <body>
    <h1>Universal Declaration of Human Rights</h1>
    <header>
      <h2>Preamble</h2>
      <p>Whereas recognition of the inherent dignity,</p>
      <p>Now,   therefore
         the General Assembly</p>
    </header>
    <article data-number="1">
      <h2>Article 1</h2>
      <p>All human beings are born free &amp; equal.</p>
    </article>
    <article data-number="2">
      <h2>Article 2</h2>
      <ol><li>First item.</li><li>Second item.</li></ol>
    </article>
  </body>
</html>
"""

KMB = """<html data-code="009" data-iso6393="kmb" dir="ltr" lang="kmb"><head><title>Mbundu (009)</title></head>
<body><header><h1>DIMATEKENU</h1><p>O kutetulula kuila.</p></header>
<article data-number="1"><h1>MOXI</h1><p>Mutu uoso uoso.</p></article></body></html>
"""


@pytest.fixture()
def package(tmp_path):
    folder = tmp_path / "node_modules" / "udhr" / "declaration"
    folder.mkdir(parents=True)
    (folder / "eng.html").write_text(ENG, encoding="utf-8")
    (folder / "009.html").write_text(KMB, encoding="utf-8")
    return tmp_path


def test_declaration_fields_and_text(package):
    d = read_declaration("eng", package)
    assert (d.code, d.name, d.bcp47, d.iso6393, d.iso6391, d.direction) == ("eng", "English", "en", "eng", "en", "ltr")
    assert d.title == "Universal Declaration of Human Rights"
    assert d.sections == {0: "Preamble\nWhereas recognition of the inherent dignity,\nNow, therefore the General Assembly",
                          1: "Article 1\nAll human beings are born free & equal.",
                          2: "Article 2\nFirst item.\nSecond item."}
    k = read_declaration("009", package)
    assert k.iso6391 is None and k.title == "" and k.sections[1] == "MOXI\nMutu uoso uoso."


def test_documents_by_declaration_and_article(package):
    docs = {d.id: d for d in udhr_documents(root=package)}
    assert sorted(docs) == ["udhr/009", "udhr/eng"]
    eng = docs["udhr/eng"]
    assert eng.text.startswith("Universal Declaration of Human Rights\n\nPreamble\n")
    assert (eng.domain, eng.lang, eng.source) == ("general", "en", "udhr")
    assert eng.meta == {"code": "eng", "name": "English", "bcp47": "en", "iso6393": "eng", "direction": "ltr",
                        "articles": [0, 1, 2]}
    assert (docs["udhr/009"].domain, docs["udhr/009"].lang) == ("multilingual", None)
    articles = list(udhr_documents(Unit.ARTICLE, codes=["eng"], articles={1, 2}, root=package))
    assert [a.id for a in articles] == ["udhr/eng/1", "udhr/eng/2"]
    assert articles[1].text == "Article 2\nFirst item.\nSecond item." and articles[1].meta["article"] == 2
    joined = next(udhr_documents(codes=["eng"], articles={2}, root=package))
    assert joined.text == "Article 2\nFirst item.\nSecond item."  # no title when articles are chosen


def test_missing_install_and_unknown_code_raise(tmp_path, package, monkeypatch):
    monkeypatch.delenv(udhr.ENV_DIR, raising=False)
    with pytest.raises(FileNotFoundError, match="npm install --prefix .* udhr"):
        read_declaration("eng", tmp_path / "nowhere")
    with pytest.raises(KeyError, match="'xyz'"):
        read_declaration("xyz", package)


def test_installed_package():
    try:
        udhr.package_dir()
    except FileNotFoundError:
        pytest.skip(f"npm package udhr not installed ({udhr.INSTALL_COMMAND})")
    codes = udhr.declaration_codes()
    assert len(codes) >= 500
    eng = read_declaration("eng")
    assert eng.sections[1] == ("Article 1\nAll human beings are born free and equal in dignity and rights. They are "
                               "endowed with reason and conscience and should act towards one another in a spirit "
                               "of brotherhood.")
    assert sorted(eng.sections) == list(range(31))
    zh = read_declaration("cmn_hans")
    assert (zh.iso6391, zh.title, len(zh.sections)) == ("zh", "世界人权宣言", 31)
