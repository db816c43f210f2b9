"""MkDocs hook: the results generated from docs/results/*.json at build time (tables, plots, every file's values).

A page asks for a generated block with an HTML comment on a line of its own, ``<!-- results: NAME -->``; NAME is
one of SECTIONS. Plots are generated files under results/plots/ (PLOTS), linked from the page like any image.
``<!-- results: every-file -->`` lists every JSON file in docs/results, each as a collapsed table of its values,
so files without a headline table are on the site too. An unknown NAME is a build warning.
"""

from __future__ import annotations

import logging
import re

import results_tables as speed
import results_tables_training as training
from mkdocs.structure.files import File
from results_data import RESULTS, flatten, load, table
from results_plots import PLOTS

log = logging.getLogger("mkdocs.hooks.results")
DIRECTIVE = re.compile(r"^<!-- results: (?P<name>[\w-]+) -->$", re.MULTILINE)
PLOT_DIR = "results/plots"


def every_file() -> str:
    blocks = []
    for path in sorted(RESULTS.glob("*.json")):
        rows = [[f"`{key}`", value] for key, value in flatten(load(path.name))]
        body = table(["key", "value"], rows).replace("\n", "\n    ")
        blocks.append(f'??? note "{path.name}: {len(rows)} values"\n\n    {body}\n')
    return "\n".join(blocks)


SECTIONS = {
    "llama-bench": speed.llama_bench, "decode": speed.decode_variants, "architectures": speed.architectures,
    "compression": speed.compression, "serving": speed.serving, "speculative": speed.speculative,
    "schemas": speed.schemas, "structured-finish": speed.structured_finish,
    "eval": training.eval_suite, "posttrain": training.posttrain, "tool-sft": training.tool_sft,
    "reward-model": training.reward_model, "rloo": training.rloo, "rl-async": training.rl_async,
    "vlm": training.vlm, "vision-encoder": training.vision_encoder, "flip": training.flip,
    "every-file": every_file,
}


def on_files(files, config):
    for name, draw in PLOTS.items():
        files.append(File.generated(config, f"{PLOT_DIR}/{name}", content=draw()))
    return files


def on_page_markdown(markdown, page, config, files):
    def expand(match: re.Match) -> str:
        name = match["name"]
        if name not in SECTIONS:
            log.warning(f"{page.file.src_uri}: unknown results block {name!r} (known: {sorted(SECTIONS)})")
            return match[0]
        return SECTIONS[name]()

    return DIRECTIVE.sub(expand, markdown)
