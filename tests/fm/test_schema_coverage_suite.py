"""Every draft 2020-12 schema of the official JSON-Schema-Test-Suite has exactly two outcomes on openafm's
guided-generation path: it compiles, or it is rejected with a typed error (InvalidGenerationSchemaError /
GrammarError). Any other exception is a bug. No model runs here (seconds).

The suite comes from the jsonschema sdist; tests make no network calls: `make test`'s set-up caches it
(``benchmarks/schema_coverage.py --fetch-only``), and these tests skip, saying so, where it is missing.
"""

from __future__ import annotations

import json
import re

from openafm.fm import GenerationSchema, InvalidGenerationSchemaError
from openafm.fm.jsonschema.keywords import KEYWORDS, KeywordKind
from openafm.runtime.constrained import GrammarConstraint, GrammarError
from schema_suite import benchmark_module, cases  # noqa: F401  (cases: a module fixture, the suite's schemas)

# Files of the main suite whose every schema uses only keywords openafm enforces: all must compile.
FULLY_SUPPORTED = ("const.json", "enum.json", "type.json", "items.json", "prefixItems.json", "properties.json",
                   "required.json", "minimum.json", "maximum.json", "pattern.json", "default.json")

# Validation keywords nothing enforces (openafm.fm.jsonschema.keywords, kind UNSUPPORTED): a schema using any must be rejected.
# (minContains/maxContains constrain only beside `contains`, itself here.) Rewritten keywords compile or are
# rejected; what compiles is held to the suite's instances by the test of invalid instances below.
UNENFORCED = frozenset(k for k, (kind, _) in KEYWORDS.items() if kind is KeywordKind.UNSUPPORTED) - {
    "minContains", "maxContains"}
REWRITTEN = frozenset(k for k, (kind, _) in KEYWORDS.items() if kind is KeywordKind.REWRITTEN)


def compile_or_reject(schema, tokenizer) -> Exception | None:
    """None if schema compiles on openafm's path; the typed error if it is rejected. Anything else raises."""
    try:
        normalized = GenerationSchema.from_json_schema(schema).to_json_schema()
        GrammarConstraint.from_json_schema(normalized, tokenizer)
    except (InvalidGenerationSchemaError, GrammarError) as e:
        return e
    return None


def test_every_schema_compiles_or_raises_a_typed_error(cases, tokenizer):
    third = []
    for case in cases:
        try:
            error = compile_or_reject(case.schema, tokenizer)
        except Exception as e:   # the third outcome
            third.append(f"{case.id} ({case.description}): {type(e).__name__}: {e}")
            continue
        if error is not None:
            assert str(error).strip(), f"{case.id}: rejected with an empty message"
    assert third == [], "neither compiled nor rejected with a typed error:\n" + "\n".join(third)


def test_unenforced_keywords_are_rejected_naming_the_keyword(cases, tokenizer):
    bench = benchmark_module()
    silent = []
    for case in cases:
        unsupported = bench.keywords(case.schema) & UNENFORCED
        if not unsupported:
            continue
        error = compile_or_reject(case.schema, tokenizer)
        named = re.search(r"JSON Schema keyword '([^']+)'", str(error)) if error is not None else None
        # The first unenforced keyword met is named: one of these, or another this schema uses ($anchor, ...).
        if not isinstance(error, InvalidGenerationSchemaError) or named is None \
                or named.group(1) not in bench.keywords(case.schema):
            silent.append(f"{case.id}: uses {sorted(unsupported)}, got {error!r}")
    assert silent == []


def test_rewritten_keywords_compile_or_are_rejected_naming_a_keyword(cases, tokenizer):
    bench = benchmark_module()
    unnamed, compiled = [], 0
    for case in cases:
        if not bench.keywords(case.schema) & REWRITTEN:
            continue
        error = compile_or_reject(case.schema, tokenizer)
        compiled += error is None
        if error is not None and "llguidance" not in str(error) and not re.search(r"JSON Schema keyword '", str(error)):
            unnamed.append(f"{case.id}: {error}")
    assert unnamed == [] and compiled >= 40


def test_remote_refs_are_rejected_not_fetched(cases, tokenizer):
    remote = [c for c in cases if c.id.startswith("refRemote.json#")]
    assert len(remote) >= 10
    for case in remote:
        error = compile_or_reject(case.schema, tokenizer)
        assert isinstance(error, InvalidGenerationSchemaError), case.id
        assert "http://localhost:1234/" in str(error) and "does not fetch" in str(error), (case.id, str(error))


def test_schemas_of_supported_keywords_all_compile(cases, tokenizer):
    chosen = [c for c in cases if c.id.split("#")[0] in FULLY_SUPPORTED]
    assert {c.id.split("#")[0] for c in chosen} == set(FULLY_SUPPORTED)
    rejected = [(c.id, str(e)) for c in chosen if (e := compile_or_reject(c.schema, tokenizer)) is not None]
    assert rejected == []


def test_no_instance_the_suite_calls_invalid_is_accepted_by_a_compiled_grammar(cases, tokenizer):
    """Main suite only: the optional/ format tests expose known gaps of llguidance's format regexes
    (any February 29th, a leap second at any minute) — see the benchmark's report."""
    holes, checked = [], 0
    for case in cases:
        if case.optional:
            continue
        try:
            normalized = GenerationSchema.from_json_schema(case.schema).to_json_schema()
        except InvalidGenerationSchemaError:
            continue
        matcher = GrammarConstraint.from_json_schema(normalized, tokenizer).matcher
        for test in case.tests:
            if test["valid"]:
                continue
            text = json.dumps(test["data"], ensure_ascii=False)
            tokens = tokenizer.encode(text)
            matcher.reset()
            if matcher.validate_tokens(tokens) == len(tokens) and matcher.consume_tokens(tokens) \
                    and matcher.is_accepting():
                holes.append(f"{case.id} ({test['description']}): {text}")
            checked += 1
    assert checked > 100
    assert holes == []
