"""JSON Schema coverage: every draft 2020-12 schema of the official JSON-Schema-Test-Suite either compiles
for guided generation or is rejected loudly; compiled schemas produce instances that validate.

The suite ships in the ``jsonschema`` package's source distribution (not its wheel). The first run fetches
that sdist with ``pip download`` for the installed jsonschema version and keeps only
``json/tests/draft2020-12/`` under ``$XDG_CACHE_HOME/openafm/json-schema-test-suite/<version>/`` (default
``~/.cache``); later runs reuse it. ``tests/fm/test_schema_coverage_suite.py`` reads the same cache.

Per schema, openafm's own path decides the outcome:

1. ``fm.GenerationSchema.from_json_schema(schema)`` — raises ``InvalidGenerationSchemaError`` naming the
   keyword it cannot enforce (or what llguidance rejects: unknown formats, remote ``$ref``s, which the
   engine never fetches, unsatisfiable schemas);
2. ``runtime.constrained.GrammarConstraint.from_json_schema(normalized, tokenizer)`` — raises ``GrammarError``.

compiled / rejected(typed) are the only two expected outcomes; any other exception is a third outcome, a bug,
listed with its traceback location. The ``optional/`` subfolder (bignum, ecmascript-regex, format assertion,
...) is reported separately from the main suite, with the same outcomes.

For the compiled schemas:

* suite instances: each of the suite's test instances (compact JSON, the separators the grammar forces) is
  run through the compiled grammar. An instance the suite labels INVALID that the grammar accepts is an
  enforcement hole (target 0). Valid instances the grammar rejects are counted only (the grammar fixes
  property order and whitespace, so it admits a subset of the valid texts by design).
* generation: the embedded SmolLM2-135M-Instruct, greedy, prompted with the schema after three worked
  examples, writes one instance under the constraint; it is validated with ``jsonschema.Draft202012Validator``
  with format assertion on (openafm enforces ``format``). Outcomes: validated, invalid (target 0),
  duplicate_keys (the grammar let an object name a key twice; parsers keep one value; target 0), incomplete
  at the token limit (128 by default: 1.5x the longest valid instance in the suite; greedy outputs that reach
  it are loops such as ``1.2000...`` or re-nested objects), GrammarError dead end, other exception (bug), and
  validator_error (jsonschema itself cannot check it, e.g. a ``\\p{...}`` pattern Python's ``re`` lacks).
  ``--sample N`` draws a seeded random sample instead of all compiled schemas; all 190 take ~10-19 minutes
  on 2 shared CPU cores, so the default is all.

Real-world schemas (``benchmarks/_schemastore.py``): the SchemaStore schemas vendored inside the PyPI package
``check-jsonschema`` (dev extras; no network). All are compiled; a seeded sample of the compiled ones (at most
``--generate-limit``) gets one greedy instance within ``--realworld-max-new-tokens`` (400) tokens, validated by
``jsonschema`` with the validator of the schema's own draft. ``sources`` sums up both sets: per source the share
of schemas that compile and, of those generated for, the share with a valid instance.

    python benchmarks/schema_coverage.py --json
"""

from __future__ import annotations

import glob
import importlib.metadata
import json
import os
import random
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
import traceback
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import Any

sys.path.insert(0, os.path.dirname(__file__))
import _schemastore  # noqa: E402
from _common import emit, log, parser  # noqa: E402

from openafm.fm import GenerationSchema, InvalidGenerationSchemaError, SchemaFit, StructuredDecoding  # noqa: E402
from openafm.runtime.constrained import GrammarConstraint, GrammarError  # noqa: E402

DRAFT = "draft2020-12"
SYSTEM = "You reply with one short JSON value that matches the given JSON Schema, and nothing else."
# Worked examples in the chat: without them the 135M model mostly echoes the schema's own text and loops to the
# token limit (measured: 68 of 190 outputs incomplete with a bare one-line prompt; 6 of 17 of those with these).
# The prompt only steers; the grammar alone decides what is valid.
EXAMPLES = [({"type": "integer", "minimum": 1}, 7),
            ({"type": "object", "properties": {"name": {"type": "string"}}}, {"name": "Ann"}),
            ({"type": "array", "items": {"type": "number"}}, [1.5, 2])]


def prompt_messages(schema: Any) -> list[dict]:
    """The chat: instruction, the worked examples, then the schema to fill."""
    messages = [{"role": "system", "content": SYSTEM}]
    for example, value in EXAMPLES:
        messages += [{"role": "user", "content": f"Schema: {json.dumps(example)}"},
                     {"role": "assistant", "content": json.dumps(value)}]
    return messages + [{"role": "user", "content": f"Schema: {json.dumps(schema)}"}]


# ---- the suite: fetch once, cache, load ---------------------------------------------------------

class SuiteUnavailableError(RuntimeError):
    """The JSON-Schema-Test-Suite could not be fetched or is not where it should be."""


def suite_dir(version: str | None = None) -> str:
    """Where the draft 2020-12 tests of the installed jsonschema version are cached (may not exist yet)."""
    version = version or importlib.metadata.version("jsonschema")
    root = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(root, "openafm", "json-schema-test-suite", version, DRAFT)


def fetch_suite() -> str:
    """The cached suite directory, downloading the jsonschema sdist with pip the first time."""
    version = importlib.metadata.version("jsonschema")
    target = suite_dir(version)
    if os.path.isdir(target):
        return target
    os.makedirs(os.path.dirname(target), exist_ok=True)
    with tempfile.TemporaryDirectory(dir=os.path.dirname(target)) as tmp:
        log(f"fetching the jsonschema {version} sdist (the test suite is not in the wheel) ...")
        cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:",
               f"jsonschema=={version}", "-d", tmp]
        proc = subprocess.run(cmd, capture_output=True, text=True)
        sdists = glob.glob(os.path.join(tmp, f"jsonschema-{version}.tar.gz"))
        if proc.returncode != 0 or not sdists:
            raise SuiteUnavailableError(
                f"pip could not download the jsonschema {version} source distribution, which carries the "
                f"JSON-Schema-Test-Suite ({' '.join(cmd)} exited {proc.returncode}): {proc.stderr.strip()[-800:]}")
        prefix = f"jsonschema-{version}/json/tests/{DRAFT}/"
        with tarfile.open(sdists[0]) as tar:
            members = [m for m in tar.getmembers() if m.name.startswith(prefix) and m.isfile()]
            if not members:
                raise SuiteUnavailableError(f"{os.path.basename(sdists[0])} has no {prefix} folder")
            tar.extractall(os.path.join(tmp, "x"), members=members, filter="data")
        staged = os.path.join(tmp, DRAFT)
        shutil.move(os.path.join(tmp, "x", prefix), staged)
        os.replace(staged, target)  # atomic: a half-extracted suite is never seen as cached
    log(f"cached the suite at {target}")
    return target


@dataclass
class Case:
    """One schema of the suite with its test instances."""
    id: str              # "ref.json#3" (or "optional/format/date.json#0")
    description: str
    schema: Any          # a dict, or a boolean schema
    tests: list[dict]    # [{description, data, valid}]
    optional: bool


def load_suite(directory: str) -> list[Case]:
    """Every schema in directory (recursively), the optional/ subfolder flagged."""
    cases = []
    for path in sorted(glob.glob(os.path.join(directory, "**", "*.json"), recursive=True)):
        rel = os.path.relpath(path, directory).replace(os.sep, "/")
        with open(path, encoding="utf-8") as f:
            for i, group in enumerate(json.load(f)):
                cases.append(Case(f"{rel}#{i}", group["description"], group["schema"], group["tests"],
                                  optional=rel.startswith("optional/")))
    return cases


# ---- keywords a schema uses ---------------------------------------------------------------------

_SUB_MAPS = ("properties", "patternProperties", "$defs", "definitions", "dependentSchemas")
_SUB_LISTS = ("allOf", "anyOf", "oneOf", "prefixItems")
_SUB_ONE = ("items", "additionalProperties", "not", "if", "then", "else", "contains", "propertyNames",
            "unevaluatedItems", "unevaluatedProperties", "contentSchema", "additionalItems")


def keywords(schema: Any) -> set[str]:
    """The JSON Schema keywords used anywhere in schema, walking subschema positions only (so property
    names and enum/const values are not counted). A boolean root schema counts as '(boolean schema)'."""
    if isinstance(schema, bool):
        return {"(boolean schema)"}
    found: set[str] = set()

    def walk(node: Any) -> None:
        if not isinstance(node, dict):
            return
        for key, value in node.items():
            found.add(key)
            if key in _SUB_MAPS and isinstance(value, dict):
                subs = list(value.values())
            elif key in _SUB_LISTS and isinstance(value, list):
                subs = value
            else:
                subs = [value] if key in _SUB_ONE else []
            for sub in subs:
                walk(sub)

    walk(schema)
    return found


# ---- outcome 1: compile -------------------------------------------------------------------------

@dataclass
class Compiled:
    case: Case
    outcome: str                          # "compiled" | "rejected" | "bug"
    stage: str = ""                       # which call decided: "GenerationSchema" | "GrammarConstraint"
    message: str = ""
    constraint: GrammarConstraint | None = None
    normalized: dict | None = None
    where: list[str] = field(default_factory=list)   # traceback frames of a bug, innermost last


def where(e: BaseException) -> list[str]:
    """The last frames of an exception's traceback as 'file:line in function'."""
    frames = traceback.extract_tb(e.__traceback__)[-4:]
    return [f"{os.path.relpath(f.filename)}:{f.lineno} in {f.name}" for f in frames]


def compile_case(case: Case, tokenizer, fit: SchemaFit = SchemaFit.EXACT) -> Compiled:
    stage = "GenerationSchema"
    try:
        normalized = GenerationSchema.from_json_schema(case.schema, fit=fit).to_json_schema()
        stage = "GrammarConstraint"
        constraint = GrammarConstraint.from_json_schema(normalized, tokenizer)
    except (InvalidGenerationSchemaError, GrammarError) as e:
        return Compiled(case, "rejected", stage, f"{type(e).__name__}: {e}")
    except Exception as e:  # the third outcome: neither compiled nor a typed rejection
        return Compiled(case, "bug", stage, f"{type(e).__name__}: {e}", where=where(e))
    return Compiled(case, "compiled", stage, constraint=constraint, normalized=normalized)


def rejection_reason(message: str) -> str:
    """A short bucket for a rejection message: the keyword openafm names, else the engine's reason."""
    message = message.removeprefix("invalid generation schema: ")
    if "JSON Schema keyword '" in message:
        return "keyword " + message.split("JSON Schema keyword '", 1)[1].split("'", 1)[0]
    if "must be a dict, got bool" in message:
        return "boolean root schema"
    reason = message.split("rejects the JSON Schema: ", 1)[-1]
    if reason.startswith("Resource '"):
        return "remote $ref (not fetched)"
    if not reason.startswith("Unknown format"):
        reason = reason.split(":", 1)[0]          # drop the details after the engine's first colon
    return "llguidance: " + reason[:70]


# ---- outcome 2: the suite's instances through the grammar ----------------------------------------

def grammar_accepts(compiled: Compiled, tokenizer, text: str) -> bool:
    """Whether the compiled grammar admits text as a complete output."""
    matcher = compiled.constraint.matcher
    matcher.reset()
    tokens = tokenizer.encode(text)
    ok = matcher.validate_tokens(tokens) == len(tokens) and matcher.consume_tokens(tokens) and matcher.is_accepting()
    matcher.reset()
    return bool(ok)


def check_instances(compiled: list[Compiled], tokenizer) -> dict:
    counts: Counter = Counter()
    valid_rejected_by_file: Counter = Counter()
    holes, bugs = [], []
    for c in compiled:
        for test in c.case.tests:
            text = json.dumps(test["data"], ensure_ascii=False)   # ", " and ": ": the grammar's separators
            try:
                accepted = grammar_accepts(c, tokenizer, text)
            except Exception as e:
                bugs.append({"schema_id": c.case.id, "instance": text, "error": f"{type(e).__name__}: {e}",
                             "where": where(e)})
                continue
            label = "valid" if test["valid"] else "invalid"
            counts[f"{label}_{'accepted' if accepted else 'rejected'}"] += 1
            if test["valid"] and not accepted:
                valid_rejected_by_file[c.case.id.split("#")[0]] += 1
            if accepted and not test["valid"]:
                holes.append({"schema_id": c.case.id, "schema_description": c.case.description,
                              "test": test["description"], "schema": c.case.schema, "instance": text})
    return {"instances": sum(counts.values()), **{k: counts[k] for k in
            ("valid_accepted", "valid_rejected", "invalid_rejected", "invalid_accepted")},
            "valid_rejected_by_file": dict(valid_rejected_by_file.most_common()),
            "invalid_accepted_list": holes, "errors": bugs}


# ---- outcome 3: generate with the model and validate --------------------------------------------

class DuplicateKeyError(ValueError):
    """An object names a key twice: parsers keep one of the values, so what was generated is not what is read."""


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict:
    keys = [k for k, _ in pairs]
    repeated = sorted({k for k in keys if keys.count(k) > 1})
    if repeated:
        raise DuplicateKeyError(f"duplicate object key(s) {repeated}: a JSON parser keeps only one value "
                                f"(RFC 8259: names SHOULD be unique), so the parsed instance differs from the text")
    return dict(pairs)


def generate_one(lm, c: Compiled, max_new_tokens: int, validator_cls, format_checker) -> dict:
    from openafm.runtime.generate import FinishReason, GenerationStats, generate_tokens
    prompt = lm.encode(lm.chat_prompt(prompt_messages(c.case.schema)))
    # A fresh constraint: the compile step's matcher was used for the suite instances.
    constraint = GrammarConstraint.from_json_schema(c.normalized, lm.tokenizer)
    record = {"schema_id": c.case.id, "description": c.case.description, "schema": c.case.schema}
    stats = GenerationStats()
    try:
        g = generate_tokens(lm.model, [prompt], max_new_tokens=max_new_tokens, constraint=constraint,
                            tokenizer=lm.tokenizer, eos_token_ids=set(lm.tokenizer.eos_token_ids), stats=stats)[0]
    except GrammarError as e:
        return {**record, "outcome": "grammar_error", "error": str(e)}
    except Exception as e:
        return {**record, "outcome": "bug", "error": f"{type(e).__name__}: {e}", "where": where(e)}
    record.update(output=g.text, tokens=len(g.token_ids), forced_tokens=stats.forced_tokens,
                  finish_reason=g.finish_reason)
    if g.finish_reason == FinishReason.LENGTH:
        return {**record, "outcome": "incomplete"}
    try:
        value = json.loads(g.text, object_pairs_hook=_unique_keys)
    except json.JSONDecodeError as e:
        return {**record, "outcome": "invalid", "error": f"not JSON: {e}"}
    except DuplicateKeyError as e:   # the grammar let a key repeat; what jsonschema sees is the last-wins parse
        try:
            last_wins = validator_cls(c.case.schema, format_checker=format_checker).is_valid(json.loads(g.text))
        except Exception:
            last_wins = None
        return {**record, "outcome": "duplicate_keys", "error": str(e),
                "jsonschema_valid_after_last_wins_parse": last_wins}
    try:
        errors = list(validator_cls(c.case.schema, format_checker=format_checker).iter_errors(value))
    except Exception as e:  # the reference validator itself failed: neither openafm's fault nor a verdict
        return {**record, "outcome": "validator_error", "error": f"{type(e).__name__}: {e}"}
    if errors:
        spec_valid = validator_cls(c.case.schema).is_valid(value)   # format as annotation only
        return {**record, "outcome": "invalid", "error": errors[0].message[:300],
                "valid_without_format_assertion": spec_valid}
    return {**record, "outcome": "validated"}


def generate_all(lm, chosen: list[Compiled], max_new_tokens: int) -> list[dict]:
    from jsonschema import Draft202012Validator
    from tqdm import tqdm
    results = []
    bar = tqdm(chosen, desc="generate", unit="schema", file=sys.stderr, dynamic_ncols=True)
    for c in bar:
        t = time.perf_counter()
        r = generate_one(lm, c, max_new_tokens, Draft202012Validator, Draft202012Validator.FORMAT_CHECKER)
        r["seconds"] = round(time.perf_counter() - t, 3)
        results.append(r)
        bar.set_postfix(Counter(x["outcome"] for x in results), refresh=False)
    return results


def generation_summary(results: list[dict], max_new_tokens: int) -> dict:
    counts = Counter(r["outcome"] for r in results)
    checked = ("validated", "invalid", "duplicate_keys")   # finished outputs that got a verdict
    finished = sum(counts[k] for k in checked)
    lengths = sorted(r["tokens"] for r in results if r["outcome"] in checked)

    def listed(outcome: str, keys: tuple[str, ...]) -> list[dict]:
        return [{k: r[k] for k in keys if k in r} for r in results if r["outcome"] == outcome]

    return {
        "schemas": len(results),
        **{k: counts[k] for k in ("validated", "invalid", "duplicate_keys", "incomplete", "grammar_error", "bug",
                                  "validator_error")},
        "validation_rate_of_finished": counts["validated"] / finished if finished else None,
        "validation_rate_of_all": counts["validated"] / len(results) if results else None,
        "max_new_tokens": max_new_tokens,
        "finished_output_tokens": {"median": lengths[len(lengths) // 2] if lengths else None,
                                   "max": lengths[-1] if lengths else None},
        "seconds": {"total": round(sum(r["seconds"] for r in results), 1),
                    "per_schema_median": sorted(r["seconds"] for r in results)[len(results) // 2] if results else None},
        "invalid_list": listed("invalid", ("schema_id", "description", "schema", "output", "error",
                                           "valid_without_format_assertion")),
        "duplicate_keys_list": listed("duplicate_keys", ("schema_id", "description", "schema", "output", "error",
                                                         "jsonschema_valid_after_last_wins_parse")),
        "incomplete_list": listed("incomplete", ("schema_id", "description", "output")),
        "grammar_error_list": listed("grammar_error", ("schema_id", "description", "schema", "error")),
        "bug_list": listed("bug", ("schema_id", "description", "schema", "error", "where")),
        "validator_error_list": listed("validator_error", ("schema_id", "description", "output", "error")),
    }


# ---- report -------------------------------------------------------------------------------------

def compile_summary(results: list[Compiled]) -> dict:
    counts = Counter(r.outcome for r in results)
    per_keyword: dict[str, Counter] = defaultdict(Counter)
    for r in results:
        for k in keywords(r.case.schema):
            per_keyword[k][r.outcome] += 1
    table = {k: {"schemas": sum(v.values()), "compiled": v["compiled"], "rejected": v["rejected"], "bug": v["bug"],
                 "compile_rate": round(v["compiled"] / sum(v.values()), 3)}
             for k, v in sorted(per_keyword.items(), key=lambda kv: (-sum(kv[1].values()), kv[0]))}
    return {
        "schemas": len(results),
        "compiled": counts["compiled"], "rejected": counts["rejected"], "bug": counts["bug"],
        "compile_rate": round(counts["compiled"] / len(results), 3) if results else None,
        "rejected_by_stage": dict(Counter(r.stage for r in results if r.outcome == "rejected")),
        "rejection_reasons": dict(Counter(rejection_reason(r.message) for r in results
                                          if r.outcome == "rejected").most_common()),
        "per_keyword": table,
        "bug_list": [{"schema_id": r.case.id, "description": r.case.description, "schema": r.case.schema,
                      "stage": r.stage, "error": r.message, "where": r.where} for r in results if r.outcome == "bug"],
    }


def main() -> None:
    p = parser(__doc__)
    p.add_argument("--sample", type=int, default=0,
                   help="generate for a seeded random sample of N compiled schemas (0: all of them)")
    p.add_argument("--seed", type=int, default=0, help="seed of the --sample draw")
    p.add_argument("--max-new-tokens", type=int, default=128,
                   help="generation limit per schema; outputs that reach it count as incomplete (128: 1.5x the "
                        "longest valid suite instance, 86 tokens; greedy outputs that pass it are loops)")
    p.add_argument("--threads", type=int, default=1,
                   help="torch threads (1: on a shared 2-core machine more threads oversubscribe and run ~10x slower)")
    p.add_argument("--generate-limit", type=int, default=10,
                   help="real-world set: generate for a seeded sample of at most N compiled schemas (~25 s each)")
    p.add_argument("--realworld-max-new-tokens", type=int, default=400, help="real-world set: generation limit")
    p.add_argument("--fetch-only", action="store_true",
                   help="only download and cache the suite (the Makefile's set-up runs this), then exit")
    args = p.parse_args()
    if args.fetch_only:
        print(fetch_suite(), file=sys.stderr)
        return
    start = time.perf_counter()

    import torch
    from jsonschema import Draft202012Validator

    import openafm
    torch.set_num_threads(args.threads)
    try:
        directory = fetch_suite()
    except SuiteUnavailableError as e:
        log(f"error: {e}")
        raise SystemExit(2)
    cases = load_suite(directory)
    t = time.perf_counter()
    lm = openafm.load()
    load_seconds = time.perf_counter() - t

    t = time.perf_counter()
    compiled = [compile_case(c, lm.tokenizer) for c in cases]
    compile_seconds = time.perf_counter() - t
    main_set = [r for r in compiled if not r.case.optional]
    optional_set = [r for r in compiled if r.case.optional]
    log(f"{len(cases)} schemas: " + ", ".join(f"{k} {v}" for k, v in Counter(r.outcome for r in compiled).items()))

    t = time.perf_counter()
    instances = {"main": check_instances([r for r in main_set if r.outcome == "compiled"], lm.tokenizer),
                 "optional": check_instances([r for r in optional_set if r.outcome == "compiled"], lm.tokenizer)}
    # Narrowed: more schemas compile; soundness is that no invalid instance is admitted (valid ones may be refused).
    narrowed = [compile_case(c, lm.tokenizer, SchemaFit.NARROWED) for c in cases if not c.optional]
    narrowed_instances = check_instances([r for r in narrowed if r.outcome == "compiled"], lm.tokenizer)
    instance_seconds = time.perf_counter() - t

    ok = [r for r in compiled if r.outcome == "compiled"]
    longest_valid = max(len(lm.tokenizer.encode(json.dumps(t["data"], ensure_ascii=False)))
                        for r in ok for t in r.case.tests if t["valid"])
    chosen = sorted(random.Random(args.seed).sample(ok, args.sample), key=lambda r: r.case.id) \
        if 0 < args.sample < len(ok) else ok
    log(f"generating for {len(chosen)} of {len(ok)} compiled schemas, greedy, up to {args.max_new_tokens} tokens ...")
    gen = generate_all(lm, chosen, args.max_new_tokens)
    optional_ids = {r.case.id for r in optional_set}

    t = time.perf_counter()
    try:
        realworld = _schemastore.run(lm, lm.tokenizer, args.generate_limit, args.seed, args.realworld_max_new_tokens,
                                     schema_cls=GenerationSchema, schema_error=InvalidGenerationSchemaError,
                                     constraint_cls=GrammarConstraint, grammar_error=GrammarError,
                                     fits={"exact": SchemaFit.EXACT, "narrowed": SchemaFit.NARROWED},
                                     decodings={"plain": None,
                                                # the default remedies but objects left open (the ablation)
                                                "structured_open_objects": StructuredDecoding(max_open_keys=None),
                                                "structured": StructuredDecoding()})
    except _schemastore.SchemaStoreUnavailableError as e:
        log(f"error: {e}")
        raise SystemExit(2)
    realworld_seconds = time.perf_counter() - t
    main_compile, main_gen = compile_summary(main_set), generation_summary(
        [g for g in gen if g["schema_id"] not in optional_ids], args.max_new_tokens)

    plain, structured = realworld["generation"]["plain"], realworld["generation"]["structured"]
    kept_open = realworld["generation"]["structured_open_objects"]
    result = {
        "sources": {
            "json-schema-test-suite (draft 2020-12, main)": {
                "schemas": len(main_set), "compile_rate": main_compile["compile_rate"],
                "generated_for": main_gen["schemas"], "valid_instance_rate": main_gen["validation_rate_of_all"],
                "invalid": main_gen["invalid"], "max_new_tokens": args.max_new_tokens},
            "json-schema-test-suite (draft 2020-12, main), narrowed": {
                "schemas": len(main_set), "compile_rate": compile_summary(narrowed)["compile_rate"],
                "invalid_instances_admitted": narrowed_instances["invalid_accepted"]},
            "schemastore (check-jsonschema vendor)": {
                "schemas": realworld["schemas"], "compile_rate": realworld["fits"]["exact"]["compile_rate"],
                "compile_rate_narrowed": realworld["fits"]["narrowed"]["compile_rate"],
                "generation_fit": realworld["generation"]["fit"],
                "generated_for": realworld["generation"]["sample"]["size"],
                "valid_instance_rate": plain["valid_instance_rate_of_sample"],
                "valid_instance_rate_structured": structured["valid_instance_rate_of_sample"],
                "valid_instance_rate_structured_open_objects": kept_open["valid_instance_rate_of_sample"],
                "invalid": plain["invalid"] + structured["invalid"] + kept_open["invalid"],
                "max_new_tokens": args.realworld_max_new_tokens},
        },
        "realworld": realworld,
        "suite": {"source": f"jsonschema {importlib.metadata.version('jsonschema')} sdist, json/tests/{DRAFT}",
                  "cache_dir": directory, "schemas": len(cases), "main": len(main_set),
                  "optional": len(optional_set), "instances": sum(len(c.tests) for c in cases)},
        "compile": {"main": main_compile, "optional": compile_summary(optional_set)},
        "suite_instances_through_grammar": {**instances, "main_narrowed": narrowed_instances},
        "compile_narrowed": {"main": compile_summary(narrowed)},
        "generation": {
            "model": lm.name, "decoding": "greedy",
            "prompt": {"system": SYSTEM, "examples": [[e, v] for e, v in EXAMPLES], "user": "Schema: <the schema>"},
            "max_new_tokens": args.max_new_tokens,
            "longest_valid_suite_instance_tokens": longest_valid,
            "sample": {"size": len(chosen), "of_compiled": len(ok),
                       "seed": args.seed if 0 < args.sample < len(ok) else None},
            "format_assertion_checkers": sorted(Draft202012Validator.FORMAT_CHECKER.checkers),
            "main": main_gen,
            "optional": generation_summary([g for g in gen if g["schema_id"] in optional_ids], args.max_new_tokens),
        },
        "seconds": {"model_load": round(load_seconds, 2), "compile_all": round(compile_seconds, 2),
                    "suite_instances": round(instance_seconds, 2),
                    "generation": round(sum(g["seconds"] for g in gen), 1),
                    "realworld": round(realworld_seconds, 1),
                    "total": round(time.perf_counter() - start, 1)},
        "threads": torch.get_num_threads(),
    }
    emit(result, args.json)


if __name__ == "__main__":
    main()
