"""What benchmarks/decode.py and benchmarks/fm_latency.py do when a piece is missing: llama.cpp not built names
`make bench-deps`; a weights= that fm.SystemLanguageModel does not accept yet is listed as unavailable (and the
default measured under the format it holds), while a TypeError from inside is not swallowed. No model runs here."""

from __future__ import annotations

import sys

import pytest

from bench_modules import BENCHMARKS, load_benchmark
from openafm import fm


def test_missing_llama_cpp_names_make_bench_deps(monkeypatch, gguf_path):
    bench = load_benchmark("_decode_bench")
    monkeypatch.setitem(sys.modules, "llama_cpp", None)     # `import llama_cpp` now raises ImportError
    run, missing = bench.llama_cpp_variant(gguf_path, threads=1, n_ctx=64)
    assert run is None and "make bench-deps" in missing


def test_weights_fm_does_not_accept_yet_are_listed_and_the_default_is_kept(monkeypatch):
    latency = load_benchmark("fm_latency")

    class NoWeights:                                        # an SDK model class without weights=
        def __init__(self, *, model: str = "smollm2-135m-instruct"):
            self.model_name = model

    monkeypatch.setattr(latency.fm, "SystemLanguageModel", NoWeights)
    models, unavailable = latency.system_models()
    assert [(label, how) for label, _, how in models] == [(None, "fm.SystemLanguageModel() (its default weights)")]
    assert sorted(unavailable) == ["bfloat16", "float32", "native"]
    assert all("weights" in why for why in unavailable.values())


def test_weights_fm_accepts_each_get_an_entry_and_inner_typeerrors_propagate(monkeypatch):
    latency = load_benchmark("fm_latency")

    class WithWeights:
        def __init__(self, *, weights: str = "native"):
            self.weights = weights

    monkeypatch.setattr(latency.fm, "SystemLanguageModel", WithWeights)
    models, unavailable = latency.system_models()
    assert [label for label, _, _ in models] == ["native", "float32", "bfloat16"] and unavailable == {}

    class Broken:
        def __init__(self, *, weights: str = "native"):
            raise TypeError("can't multiply sequence by non-int of type 'float'")

    monkeypatch.setattr(latency.fm, "SystemLanguageModel", Broken)
    with pytest.raises(TypeError, match="can't multiply"):
        latency.system_models()


def _page_class(readme: str, decorator: str) -> str:
    """A page's code lines from `decorator` to the end of the class body under it."""
    lines = readme.splitlines()
    first = lines.index(decorator)
    body = [lines[first], lines[first + 1]]
    for line in lines[first + 2:]:
        if not line.startswith("    "):
            break
        body.append(line)
    return "\n".join(body)


@pytest.mark.parametrize("page", ["README.md", "docs/guides/framework.md"])
def test_the_latency_example_is_the_documented_person_type(page):
    """fm_latency.py times the session the framework guide shows (its type, instructions and turns); the README's
    first example uses the same type and instructions."""
    latency = load_benchmark("fm_latency")
    text = (BENCHMARKS.parent / page).read_text()
    namespace = {"fm": fm}
    exec(_page_class(text, '@fm.generable("A person")'), namespace)  # noqa: S102 (the page's own code)
    assert (latency.Person.generation_schema().to_json_schema()
            == namespace["Person"].generation_schema().to_json_schema())
    assert f'fm.LanguageModelSession(instructions="{latency.INSTRUCTIONS}")' in text
    if page != "README.md":
        assert all(f'"{turn}"' in text for turn in latency.TURNS)
