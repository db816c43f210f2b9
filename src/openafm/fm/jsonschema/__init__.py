"""The JSON-Schema compiler of guided generation: a raw JSON Schema (drafts 04..2020-12) -> the schema the decoding
engine enforces, with every keyword accounted for (enforced, rewritten exactly, narrowed on request, or listed as
an annotation). It knows nothing of sessions or models; fm.schema.GenerationSchema is built on it.

    keywords.py        the table: each JSON Schema keyword -> annotation/enforced/rewritten/unsupported
    raw_schema.py      a raw JSON Schema -> what the engine enforces: annotations dropped and listed, rewrites applied
    negation.py        the exact complement of a schema (for not, if/else, oneOf) and proofs that two are disjoint
    narrowing.py       SchemaFit; opt-in narrowings: a subset of a keyword's values where no exact rewrite exists
    simplify.py        exact simplifications that keep the engine under its size cap (repeated properties, if-chains)
    property_names.py  propertyNames: listed names checked, other keys as patternProperties (or none, narrowed)
    open_objects.py    decoding's narrowing of open objects: declared keys only, or a bounded number (safe places only)
"""
