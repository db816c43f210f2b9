"""MkDocs hook: the API reference, one generated page per package of openafm, rendered by mkdocstrings.

The packages come from walking src/openafm at build time (tree.py), never from a hand-written list, so a module
that moves or appears is in the next build's reference. Each page holds the package's docstring and one
mkdocstrings block per module of the package; subpackages have pages of their own. The pages are added to the
nav under "API reference", after its hand-written index page (api/index.md).
"""

from __future__ import annotations

import tree
from mkdocs.structure.files import File

SECTION = "API reference"
INDEX = "api/index.md"


def page_uri(package: tree.Package) -> str:
    return f"api/{package.name}.md"


def page_markdown(package: tree.Package) -> str:
    lines = [f"# {package.name}", "", f"::: {package.name}",
             "    options:", "      members: false", "      show_root_heading: false", ""]
    if not package.modules:
        return "\n".join(lines)
    lines += ["## Modules", ""]
    lines += [f"- [`{m.name.rsplit('.', 1)[1]}`](#{m.name}): {m.summary}" for m in package.modules]
    lines.append("")
    for module in package.modules:
        lines += [f"::: {module.name}", ""]
    return "\n".join(lines)


def on_config(config):
    nav = config.nav
    if nav is None:
        raise ValueError("mkdocs.yml needs an explicit nav: the API reference is appended to it")
    pages = [{p.name: page_uri(p)} for p in tree.packages()]
    for entry in nav:
        if isinstance(entry, dict) and SECTION in entry:
            entry[SECTION] = [INDEX, *pages]
            return config
    raise ValueError(f"mkdocs.yml's nav has no {SECTION!r} section to fill (found {nav!r})")


def on_files(files, config):
    for package in tree.packages():
        files.append(File.generated(config, page_uri(package), content=page_markdown(package)))
    return files
