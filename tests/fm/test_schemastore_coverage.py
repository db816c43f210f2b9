"""The SchemaStore schemas vendored in check-jsonschema (dev extras) on openafm's guided-generation path: each
compiles or is rejected with a typed error naming why, and at least the measured number compile (a floor: the
figure of docs/results/schema_coverage.json). No model runs here. Skips, saying so, where the package is missing.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

from openafm.fm import GenerationSchema, InvalidGenerationSchemaError, SchemaFit, StructuredDecoding
from openafm.fm.schema import check_with_engine
from openafm.runtime.constrained import GrammarConstraint, GrammarError

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"
MEASURED_COMPILED = {SchemaFit.EXACT: 9, SchemaFit.NARROWED: 19}   # of 26 in check-jsonschema 0.39.0


def _schemastore():
    saved = list(sys.path)
    sys.path.insert(0, str(BENCHMARKS))
    try:
        spec = importlib.util.spec_from_file_location("schemastore_benchmark", BENCHMARKS / "_schemastore.py")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    finally:
        sys.path[:] = saved
    return module


@pytest.mark.parametrize("fit", list(SchemaFit))
def test_every_vendored_schema_compiles_or_is_rejected_with_a_typed_error(tokenizer, fit):
    store = _schemastore()
    try:
        directory = store.vendor_dir()
    except store.SchemaStoreUnavailableError as e:
        pytest.skip(str(e))
    outcomes = {name: store.compile_one(name, schema, tokenizer, GenerationSchema, InvalidGenerationSchemaError,
                                        GrammarConstraint, GrammarError, fit)
                for name, schema in store.load_schemas(directory).items()}
    assert [n for n, o in outcomes.items() if o["outcome"] == "bug"] == []
    assert all(o["error"].strip() for o in outcomes.values() if o["outcome"] == "rejected")
    assert sum(o["outcome"] == "compiled" for o in outcomes.values()) >= MEASURED_COMPILED[fit]


def test_the_session_grammar_of_every_compiled_schema_compiles_too():
    """A session bounds the grammar (StructuredDecoding: recursion unrolled, arrays bounded): that schema must
    compile wherever the schema does (CircleCI's recursion is left as it is; bamboo's "$ref": "#" is inlined)."""
    store = _schemastore()
    try:
        directory = store.vendor_dir()
    except store.SchemaStoreUnavailableError as e:
        pytest.skip(str(e))
    failures = {}
    for name, schema in store.load_schemas(directory).items():
        try:
            normalized = GenerationSchema.from_json_schema(schema, fit=SchemaFit.NARROWED).to_json_schema()
        except InvalidGenerationSchemaError:
            continue
        try:
            check_with_engine(StructuredDecoding().bounded_schema(normalized), name)
        except InvalidGenerationSchemaError as e:
            failures[name] = str(e)[:200]
    assert failures == {}
