"""The package stage: an sft stage's LoRA adapter shipped as a bundled model (checkpoint/bundled.py) — the adapter
in bfloat16 and a sidecar JSON that names the recipe, the command, the data and the figures that made it.

    - {name: package, kind: package, from: sft, bundle: openafm-135m, figures: [eval],
       install_dir: src/openafm/checkpoint/model_weights}

The sft stage must train on a packaged GGUF base (the sidecar records that file's sha256; loading the bundle
refuses any other base). OUT/<bundle>.safetensors and OUT/<bundle>.json are written atomically, and copied to
install_dir when it is set.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from safetensors import safe_open

from openafm.checkpoint.atomic import save_safetensors_atomic
from openafm.checkpoint.bundled import SIDECAR_FORMAT, file_sha256
from openafm.checkpoint.packaged import PACKAGED_GGUF, default_gguf_path
from openafm.errors import ConfigError
from openafm.io import write_text_atomic
from openafm.pipelines.recipe import PackageStage, stage_spec


def run_package(recipe, stage: PackageStage, out: Path, outputs: dict) -> dict:
    sft = recipe.stage(stage.from_)
    if sft.model not in PACKAGED_GGUF:
        raise ConfigError(f"stage {stage.name!r}: a bundle adapts a packaged GGUF base ({sorted(PACKAGED_GGUF)}); sft "
                          f"stage {sft.name!r} trained on {sft.model or 'from: ' + str(sft.from_)!r}")
    adapter = out / f"{stage.bundle}.safetensors"
    with safe_open(outputs[sft.name]["adapter"], framework="pt") as f:
        meta = f.metadata()
        tensors = {k: f.get_tensor(k).bfloat16() for k in f.keys()}           # each [r, in] or [out, r]
    save_safetensors_atomic(tensors, adapter, meta)
    sft_out = outputs[sft.name]
    sidecar = {
        "format": SIDECAR_FORMAT, "name": stage.bundle, "base": sft.model,
        "base_gguf_sha256": file_sha256(default_gguf_path()), "base_fingerprint": meta["base_fingerprint"],
        "adapter_sha256": file_sha256(adapter), "rank": int(meta["rank"]), "alpha": float(meta["alpha"]),
        "targets": json.loads(meta["targets"]), "dtype": "bfloat16",
        "command": f"openafm pipeline {recipe.source}", "seed": recipe.seed,
        "recipe": [stage_spec(s) for s in recipe.stages[:recipe.stages.index(stage)]],
        "data": sft_out["examples_per_source"],
        "sft": {k: sft_out[k] for k in ("examples", "skipped", "steps", "loss_first", "loss_last")},
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
