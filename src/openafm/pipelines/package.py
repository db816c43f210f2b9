"""The package stage: an sft stage's LoRA adapter, or the adapter an rl stage trained on (`trains: adapter`), shipped
as a bundled model (checkpoint/bundled.py) — the adapter in bfloat16 and a sidecar JSON that names the recipe, the
command, the data and the figures that made it.

    - {name: package, kind: package, from: rl, bundle: openafm-135m, figures: [eval],
       install_dir: src/openafm/checkpoint/model_weights}

The adapter must adapt a packaged GGUF base (the sidecar records that file's sha256; loading the bundle refuses any
other base). An rl or sft stage that continued a bundled model's adapter names that bundle (its data, SFT record
and recipe) under `continues`. OUT/<bundle>.safetensors and OUT/<bundle>.json are written atomically, and copied to
install_dir when it is set.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from safetensors import safe_open

from openafm.checkpoint.atomic import save_safetensors_atomic
from openafm.checkpoint.bundled import SIDECAR_FORMAT, file_sha256
from openafm.checkpoint.bundled import sidecar as bundle_sidecar
from openafm.checkpoint.packaged import BUNDLED, PACKAGED_GGUF, default_gguf_path
from openafm.errors import ConfigError
from openafm.io import write_text_atomic
from openafm.pipelines.posttrain import adapted
from openafm.pipelines.recipe import PackageStage, RLStage, SFTAdapter, stage_spec

SFT_KEYS = ("examples", "skipped", "steps", "loss_first", "loss_last")
RL_KEYS = ("steps", "heldout_before", "heldout_after", "heldout_gain")


def history(recipe, stage: PackageStage, outputs: dict) -> tuple[str, dict]:
    """-> (the packaged base the adapter adapts, the sidecar's record of what trained it: data, sft, rl, continues)."""
    source = recipe.stage(stage.from_)
    record: dict = {}
    if isinstance(source, RLStage):
        record["rl"] = {k: outputs[source.name][k] for k in RL_KEYS} | {"config": source.rl}
        base, start = adapted(recipe, source, outputs)
        if source.from_ is None:                      # a bundled model's adapter: its own history comes along
            before = bundle_sidecar(BUNDLED[start])
            record["continues"] = {k: before[k] for k in ("name", "adapter_sha256", "command", "recipe")}
            record.update({k: before[k] for k in ("data", "sft")})
            return base, record
        source = recipe.stage(source.from_)
    sft_out = outputs[source.name]
    record.update({"data": sft_out["examples_per_source"], "sft": {k: sft_out[k] for k in SFT_KEYS}})
    if source.adapter is SFTAdapter.CONTINUE:             # trained on from a bundled model's adapter: name it
        before = bundle_sidecar(BUNDLED[source.model])
        record["continues"] = {k: before[k] for k in ("name", "adapter_sha256", "command", "recipe", "data", "sft")}
        return BUNDLED[source.model].base, record
    return (source.model if source.from_ is None else f"from: {source.from_}"), record


def run_package(recipe, stage: PackageStage, out: Path, outputs: dict) -> dict:
    base, record = history(recipe, stage, outputs)
    if base not in PACKAGED_GGUF:
        raise ConfigError(f"stage {stage.name!r}: a bundle adapts a packaged GGUF base ({sorted(PACKAGED_GGUF)}); the "
                          f"adapter of {stage.from_!r} adapts {base!r}")
    adapter = out / f"{stage.bundle}.safetensors"
    with safe_open(outputs[stage.from_]["adapter"], framework="pt") as f:
        meta = f.metadata()
        tensors = {k: f.get_tensor(k).bfloat16() for k in f.keys()}           # each [r, in] or [out, r]
    save_safetensors_atomic(tensors, adapter, meta)
    sidecar = {
        "format": SIDECAR_FORMAT, "name": stage.bundle, "base": base,
        "base_gguf_sha256": file_sha256(default_gguf_path()), "base_fingerprint": meta["base_fingerprint"],
        "adapter_sha256": file_sha256(adapter), "rank": int(meta["rank"]), "alpha": float(meta["alpha"]),
        "targets": json.loads(meta["targets"]), "dtype": "bfloat16",
        "command": f"openafm pipeline {recipe.source}", "seed": recipe.seed,
        "recipe": [stage_spec(s) for s in recipe.stages[:recipe.stages.index(stage)]],
        **record,
        "figures": {ref: outputs[ref]["tasks"] for ref in stage.figures},
    }
    side = out / f"{stage.bundle}.json"
    write_text_atomic(side, json.dumps(sidecar, indent=1) + "\n")
    if stage.install_dir is not None:
        dest = Path(stage.install_dir)
        dest.mkdir(parents=True, exist_ok=True)
        for path in (adapter, side):
            shutil.copyfile(path, dest / path.name)
    return {"adapter": str(adapter), "sidecar": str(side), "adapter_bytes": adapter.stat().st_size,
            "installed_to": stage.install_dir}
