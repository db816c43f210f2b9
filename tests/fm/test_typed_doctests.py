"""The docstring examples of the typed half of openafm.fm run and pass (one per public concept)."""

import doctest
import importlib

import pytest

MODULES = ["errors", "guide", "schema", "content", "generable", "jsonschema.keywords", "jsonschema.negation",
           "jsonschema.raw_schema", "prompt"]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    # importlib: the package attributes `fm.guide` / `fm.generable` are the functions, not the modules
    module = importlib.import_module(f"openafm.fm.{name}")
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS, verbose=False)
    assert result.attempted >= 3 and result.failed == 0, result
