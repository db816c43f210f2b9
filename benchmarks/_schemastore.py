"""Real-world schemas for benchmarks/schema_coverage.py: the SchemaStore schemas vendored inside the PyPI package
``check-jsonschema`` (installed by the dev extras; read from disk, no network). Each is compiled on openafm's path;
a seeded sample of the compiled ones gets one greedy instance from the default model, validated by ``jsonschema``.

Real schemas are tens of kilobytes to megabytes, far past the model's context, so the prompt names the schema by its
title, description and top-level property names only; the grammar alone decides what is valid.
"""

from __future__ import annotations

import glob
import importlib.metadata
import importlib.util
import json
import os
import random
import time
from collections import Counter
from typing import Any

import jsonschema

from openafm.runtime.generate import FinishReason, GenerationStats, generate_tokens

PACKAGE = "check-jsonschema"
SYSTEM = "You write one short, realistic configuration file as JSON for the described format, and nothing else."


class SchemaStoreUnavailableError(RuntimeError):
    """check-jsonschema is not installed, or its vendored schemas are not where they were."""


def vendor_dir() -> str:
    """Where check-jsonschema keeps its vendored SchemaStore schemas (found without importing the package)."""
    spec = importlib.util.find_spec("check_jsonschema")
    if spec is None or not spec.submodule_search_locations:
        raise SchemaStoreUnavailableError(f"{PACKAGE} is not installed; `make setup` installs it with the dev extras "
                                          f"(pip install '.[dev]')")
    directory = os.path.join(list(spec.submodule_search_locations)[0], "builtin_schemas", "vendor")
    if not glob.glob(os.path.join(directory, "*.json")):
        raise SchemaStoreUnavailableError(f"no vendored schemas under {directory}")
    return directory


def source_name() -> str:
    return f"SchemaStore schemas vendored in {PACKAGE} {importlib.metadata.version(PACKAGE)} (builtin_schemas/vendor)"


def load_schemas(directory: str) -> dict[str, Any]:
    """{file name: schema}, sorted by name."""
    out = {}
    for path in sorted(glob.glob(os.path.join(directory, "*.json"))):
        with open(path, encoding="utf-8") as f:
            out[os.path.basename(path)] = json.load(f)
    return out


def prompt_messages(schema: dict) -> list[dict]:
    top = list(schema.get("properties", {}))[:12] if isinstance(schema.get("properties"), dict) else []
    text = f"Format: {schema.get('title', 'a configuration file')}. {str(schema.get('description', ''))[:300]}"
    if top:
        text += f"\nTop-level keys it may have: {', '.join(top)}."
    return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": text}]


def compile_one(name: str, schema: Any, tokenizer, schema_cls, schema_error, constraint_cls, grammar_error,
                fit: Any = None) -> dict:
    """Compile one schema on openafm's path (``fit``: a SchemaFit; None for the default, exact)."""
    t = time.perf_counter()
    record: dict[str, Any] = {"schema": name}
    try:
        made = schema_cls.from_json_schema(schema) if fit is None else schema_cls.from_json_schema(schema, fit=fit)
        normalized = made.to_json_schema()
        constraint_cls.from_json_schema(normalized, tokenizer)
    except (schema_error, grammar_error) as e:
        return {**record, "outcome": "rejected", "error": f"{type(e).__name__}: {str(e)[:400]}",
                "seconds": round(time.perf_counter() - t, 3)}
    except Exception as e:  # a bug: neither compiled nor a typed rejection
        return {**record, "outcome": "bug", "error": f"{type(e).__name__}: {str(e)[:400]}"}
    return {**record, "outcome": "compiled", "ignored_keywords": len(made.ignored_keywords),
            "rewritten_keywords": len(made.rewritten_keywords), "normalized": normalized,
            "narrowed_keywords": [f"{k} at {w}: {why}" for w, k, why in made.narrowed_keywords],
            "seconds": round(time.perf_counter() - t, 3)}


def generate_one(lm, name: str, schema: dict, normalized: dict, max_new_tokens: int, constraint_cls,
                 grammar_error, structured: Any = None) -> dict:
    """One greedy instance; ``structured`` (an fm.StructuredDecoding, or None for the plain grammar) bounds the
    grammar and steers the close as a session does."""
    t = time.perf_counter()
    prompt = lm.encode(lm.chat_prompt(prompt_messages(schema)))
    record: dict[str, Any] = {"schema": name, "prompt_tokens": len(prompt)}
    try:
        if structured is None:
            constraint = constraint_cls.from_json_schema(normalized, lm.tokenizer)
        else:
            constraint = structured.steer(constraint_cls.from_json_schema(structured.bounded_schema(normalized),
                                                                          lm.tokenizer), budget=max_new_tokens)
        g = generate_tokens(lm.model, [prompt], max_new_tokens=max_new_tokens, constraint=constraint,
                            tokenizer=lm.tokenizer, eos_token_ids=set(lm.tokenizer.eos_token_ids),
                            stats=GenerationStats())[0]
    except grammar_error as e:
        return {**record, "outcome": "grammar_error", "error": str(e)[:300]}
    record.update(output=g.text[:2000], tokens=len(g.token_ids), seconds=round(time.perf_counter() - t, 2))
    if g.finish_reason == FinishReason.LENGTH:
        return {**record, "outcome": "incomplete"}
    try:
        value = json.loads(g.text)
    except json.JSONDecodeError as e:
        return {**record, "outcome": "invalid", "error": f"not JSON: {e}"}
    validator_cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    try:
        errors = list(validator_cls(schema, format_checker=validator_cls.FORMAT_CHECKER).iter_errors(value))
    except Exception as e:  # the reference validator itself failed (a remote $ref it cannot fetch offline)
        return {**record, "outcome": "validator_error", "error": f"{type(e).__name__}: {str(e)[:300]}"}
    if errors:
        return {**record, "outcome": "invalid", "error": errors[0].message[:300]}
    return {**record, "outcome": "validated"}


def run(lm, tokenizer, generate_limit: int, seed: int, max_new_tokens: int, *, schema_cls, schema_error,
        constraint_cls, grammar_error, fits: dict[str, Any], decodings: dict[str, Any]) -> dict:
    """Compile every schema under each fit of ``fits`` ({label: SchemaFit}, the exact one first); generate for a
    sample of those the last fit (the most permissive) compiles."""
    schemas = load_schemas(vendor_dir())
    by_fit = {label: [compile_one(n, s, tokenizer, schema_cls, schema_error, constraint_cls, grammar_error, fit)
                      for n, s in schemas.items()] for label, fit in fits.items()}
    per_fit = {label: _compile_summary(results, len(schemas)) for label, results in by_fit.items()}
    compiled = list(by_fit.values())[-1]
    ok = [c for c in compiled if c["outcome"] == "compiled"]
    chosen = sorted(random.Random(seed).sample(ok, min(generate_limit, len(ok))), key=lambda c: c["schema"])
    by_decoding = {label: [generate_one(lm, c["schema"], schemas[c["schema"]], c["normalized"], max_new_tokens,
                                        constraint_cls, grammar_error, structured) for c in chosen]
                   for label, structured in decodings.items()}
    for results in by_fit.values():
        for c in results:
            c.pop("normalized", None)
    return {
        "source": source_name(), "schemas": len(schemas),
        "fits": per_fit,
        "generation": {
            "fit": list(fits)[-1],
            "sample": {"size": len(chosen), "of_compiled": len(ok), "seed": seed, "generate_limit": generate_limit,
                       "note": "a seeded sample of the compiled schemas (all of them when the limit allows): "
                               "generation is slow on a 2-core CPU"},
            "max_new_tokens": max_new_tokens, "decoding": "greedy", "prompt": {"system": SYSTEM},
            **{label: _generation_summary(results, len(chosen)) for label, results in by_decoding.items()},
        },
    }


def _generation_summary(generated: list[dict], chosen: int) -> dict:
    counts = Counter(g["outcome"] for g in generated)
    return {**{k: counts[k] for k in ("validated", "invalid", "incomplete", "grammar_error", "validator_error")},
            "valid_instance_rate_of_sample": round(counts["validated"] / chosen, 3) if chosen else None,
            "results": generated}


def _compile_summary(compiled: list[dict], total: int) -> dict:
    ok = sum(c["outcome"] == "compiled" for c in compiled)
    return {"compiled": ok, "compile_rate": round(ok / total, 3),
            "rejected": sum(c["outcome"] == "rejected" for c in compiled),
            "bug": sum(c["outcome"] == "bug" for c in compiled),
            "rejection_reasons": dict(Counter(_reason(c["error"]) for c in compiled if c["outcome"] == "rejected")),
            "per_schema": compiled}


def _reason(message: str) -> str:
    if "JSON Schema keyword '" in message:
        keyword = message.split("JSON Schema keyword '", 1)[1].split("'", 1)[0]
        return f"keyword {keyword}" + (" (no exact rewrite)" if "no exact rewrite" in message else "")
    return "llguidance: " + message.split("rejects the JSON Schema: ", 1)[-1].split("\n")[0][:80]
