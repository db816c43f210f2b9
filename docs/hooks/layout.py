"""MkDocs hook: "where things live", rendered from the package tree at build time.

``<!-- layout: packages -->`` on a line of its own becomes one section per package of src/openafm (tree.py walks
it on every build): the first paragraph of the package's docstring, a link to its API reference page, and a table
of its modules with their docstrings' first paragraphs. The page cannot drift from the tree.
"""

from __future__ import annotations

import api_reference
import tree
from results_data import table

DIRECTIVE = "<!-- layout: packages -->"


def packages_markdown() -> str:
    blocks = []
    for package in tree.packages():
        path = package.path.relative_to(tree.SRC.parent).as_posix() + "/"
        lines = [f"### `{package.name}`", "", f"`{path}` — {package.summary}", "",
                 f"[API reference]({api_reference.page_uri(package)})", ""]
        if package.modules:
            lines.append(table(["module", "what it holds"],
                               [[f"`{m.name.rsplit('.', 1)[1]}`", m.summary] for m in package.modules]))
        blocks.append("\n".join(lines))
    return "\n\n".join(blocks)


def on_page_markdown(markdown, page, config, files):
    if DIRECTIVE not in markdown:
        return markdown
    return markdown.replace(DIRECTIVE, packages_markdown())
