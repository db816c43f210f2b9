"""Every supported family against transformers (and llama.cpp where its Python binding is built): logits and greedy
tokens of a tiny random-weight model, loaded by openafm from the Hugging Face directory and from the GGUF file that
the test suite's writer makes (tests/families.py: llama.cpp's converter layout), in float32; and the same GGUF with
its matrices (stacked experts too) in Q4_0 / Q8_0 blocks kept as stored (weights="native") against the dequantized
model.

llama.cpp's figures (`llama_cpp_max_abs_logit_diff`) come from llama-cpp-python (`make bench-deps`) reading the very
same float32 GGUF: they check the file layout against llama.cpp's own reader, not only against openafm's. The native
figure runs 6 tokens through the block kernels (inputs over 8 rows dequantize, then multiply, as the dense model).

    python benchmarks/architectures.py --json
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from pathlib import Path

import gguf as gguf_py
import numpy as np
import torch

sys.path.insert(0, os.path.dirname(__file__))
sys.path.insert(0, str(Path(__file__).parent.parent / "tests"))   # the tiny-model maker the tests use
from _common import emit, log, parser
from families import FAMILIES, make, save_gguf, save_gguf_names, save_hf
from openafm.checkpoint.load import load_model
from openafm.runtime.generate import generate_tokens

IDS = [5, 80, 13, 200, 7, 33, 101, 258, 4, 90, 61, 17, 44, 3]
TOLERANCE = 1e-4


def family_row(name: str, root: Path) -> dict:
    model = make(name)
    ids = torch.tensor([IDS])
    with torch.no_grad():
        ref = model(ids).logits
        want = model.generate(ids, max_new_tokens=16, min_new_tokens=16, do_sample=False)[0, len(IDS):].tolist()
    hf_dir, gguf = save_hf(model, root / "hf"), save_gguf(model, name, root / "f32.gguf")
    row = {}
    for form, path in (("hf", hf_dir), ("gguf", gguf)):
        lm = load_model(path)
        with torch.no_grad():
            row[f"max_abs_logit_diff_{form}"] = (lm.model(ids) - ref).abs().max().item()
        row[f"greedy_equal_{form}"] = generate_tokens(lm.model, [IDS], max_new_tokens=16)[0].token_ids == want
    q = gguf_py.GGMLQuantizationType
    types = {n: q.Q8_0 if ".attn_v." in n else q.Q4_0 for n, s in save_gguf_names(model, name).items() if len(s) >= 2}
    quant = save_gguf(model, name, root / "q.gguf", types)
    native, dense = load_model(quant, weights="native"), load_model(quant)
    short = ids[:, :6]                            # <= 8 rows: the block kernels (longer inputs dequantize, then matmul)
    with torch.no_grad():
        row["native_max_abs_logit_diff_vs_dequantized"] = (native.model(short) - dense.model(short)).abs().max().item()
    row["native_source"] = native.source
    row["llama_cpp_max_abs_logit_diff"] = llama_cpp_diff(gguf, ref[0])
    row["max_abs_logit_diff_vs_transformers"] = max(row["max_abs_logit_diff_hf"], row["max_abs_logit_diff_gguf"])
    row["greedy_equal"] = row["greedy_equal_hf"] and row["greedy_equal_gguf"]
    return row


def llama_cpp_diff(path: Path, ref: torch.Tensor) -> float | str:
    """Max |logit difference| of llama.cpp on the float32 GGUF vs transformers, or why it was not measured."""
    try:
        import llama_cpp  # benchmark-only, built by `make bench-deps`
    except ImportError as e:
        return f"not measured: llama_cpp is not importable ({e}); run `make bench-deps`"
    try:
        llm = llama_cpp.Llama(model_path=str(path), n_ctx=64, logits_all=True, verbose=False, n_threads=2,
                              type_k=0, type_v=0)      # float32 K/V (its default, float16, adds ~1e-3)
    except Exception as e:                      # noqa: BLE001 - llama.cpp refuses the file: say so in the result
        return f"not measured: llama.cpp cannot load it ({type(e).__name__}: {e})"
    llm.eval(IDS)
    ours = np.asarray(llm.scores[: len(IDS)], dtype=np.float32)            # [T, V]
    return float(np.abs(ours - ref.numpy()).max())


def main() -> None:
    p = parser(__doc__)
    args = p.parse_args()
    start = time.perf_counter()
    rows = {}
    with tempfile.TemporaryDirectory() as tmp:
        for family in FAMILIES:
            log(f"{family.name} ...")
            root = Path(tmp) / family.name
            root.mkdir()
            rows[family.name] = family_row(family.name, root)
    out = {"families": rows, "tolerance": TOLERANCE,
           "all_within_tolerance": all(r["max_abs_logit_diff_vs_transformers"] <= TOLERANCE for r in rows.values()),
           "all_greedy_equal": all(r["greedy_equal"] for r in rows.values()),
           "torch": torch.__version__, "wall_seconds": time.perf_counter() - start}
    emit(out, args.json)


if __name__ == "__main__":
    main()
