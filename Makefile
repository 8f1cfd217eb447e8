# `make test` and `make lab` each set everything up on a fresh machine (Python 3.11, make, gcc).
PYTHON ?= python3
# `make test TF=2.16.2` (optionally PYTHON=python3.10) runs the suite against another TensorFlow in its
# own environment, .venv-tf2.16.2; pip resolves the rest to versions that work with it.
TF ?=
VENV := $(if $(TF),.venv-tf$(TF),.venv)
TF_PIN := $(if $(TF),"tensorflow-cpu==$(TF)",)
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp

.PHONY: setup test test-fast lab lint bench clean

# The sidebar (labextension/, TypeScript) is built by the install's jupyter-builder hook with jlpm, which
# jupyterlab brings; only Node.js 20.19+ is needed beside it. Users of the wheel need no Node.js at all.
NODE_CHECK = node -e 'const [a,b]=process.versions.node.split(".").map(Number); process.exit(a>20||(a==20&&b>=19)?0:1)' \
	|| { echo "make: the sidebar is built with Node.js 20.19 or newer (found: $$(node --version 2>/dev/null || echo none))"; exit 1; }
LABEXT := tfgpu_magic/labextension/package.json
LABEXT_SOURCES := package.json tsconfig.json yarn.lock $(wildcard labextension/src/*.ts labextension/src/model/*.ts labextension/style/* labextension/schema/*.json)
JLPM = PATH="$(abspath $(BIN)):$$PATH" $(abspath $(BIN))/jlpm

$(STAMP): pyproject.toml
	@$(NODE_CHECK)
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip 2>&1 | grep -v "^WARNING: Location" || true
	$(BIN)/python -m pip install -q -e ".[test,lab,bench]" $(TF_PIN) 2>&1 | grep -v "^WARNING: Location" || true
	$(BIN)/python -c "import tfgpu_magic, tensorflow, IPython, nbclient, jupyterlab, jupyter_server"
	@test -f $(LABEXT) || { echo "make: the install did not build the sidebar ($(LABEXT) is missing)"; exit 1; }
	# JupyterLab then reads the sidebar from the working tree (a link), so `make` after an edit is enough.
	PATH="$(abspath $(BIN)):$$PATH" $(BIN)/jupyter labextension develop --overwrite . >/dev/null
	touch $(STAMP)

# Rebuilt when a source changed since the install built it.
$(LABEXT): $(LABEXT_SOURCES) | $(STAMP)
	$(JLPM) install >/dev/null
	$(JLPM) build
	touch $(LABEXT)

# JupyterHub's proxy for tests/hub (a real Hub on loopback): from npm, into the venv, so `make clean` removes it.
CHP_VERSION := 5.3.0
CHP := $(VENV)/chp/node_modules/.bin/configurable-http-proxy
$(CHP): | $(STAMP)
	npm install --silent --no-audit --no-fund --prefix $(VENV)/chp configurable-http-proxy@$(CHP_VERSION) >/dev/null

setup: $(STAMP) $(LABEXT) $(CHP)

# PYTHONUNBUFFERED hides the C-level buffering bugs users hit in kernels: tests run without it.
# The frontend's model tests (labextension/test, node --test) run inside pytest: tests/frontend/test_sidebar_model.py.
# Two passes: everything but the browser and the Hub on two workers (a file's tests stay together, so a module's
# server or kernel starts once), then the browser and Hub tests alone, one at a time: a page's timing under a second
# worker's TensorFlow is not what a user's page has.
test: $(STAMP) $(LABEXT) $(CHP)
	env -u PYTHONUNBUFFERED $(BIN)/ruff check tfgpu_magic tests benchmarks
	env -u PYTHONUNBUFFERED $(BIN)/python -m pytest -m "not browser and not hub" -n 2 --dist loadfile
	env -u PYTHONUNBUFFERED $(BIN)/python -m pytest -m "browser or hub"

# The fast tier: the linter, then every test with no slow marker (`-m "not slow"`: tests/core, render and ipython) on
# every core. No kernel, no TensorFlow, no server, no browser, no Node.js (tests/support/tierguard.py fails a test
# there that starts one), so it needs the venv only: not the sidebar's build, not the Hub's proxy.
test-fast: $(STAMP)
	env -u PYTHONUNBUFFERED $(BIN)/ruff check tfgpu_magic tests benchmarks
	env -u PYTHONUNBUFFERED $(BIN)/python -m pytest -m "not slow" -n auto

# Jupyter refuses to run as root without --allow-root; CI machines and containers are root.
ROOT_FLAG := $(if $(filter 0,$(shell id -u)),--allow-root,)

# The learner works on copies in course/ (git-ignored), so doing the course never changes notebooks/.
# A copy already there is kept: the learner's work survives the next `make lab`.
COURSE := course

.PHONY: course
course:
	$(PYTHON) notebooks/prepare_course.py "$(COURSE)"

# The server's root is the working copy; the URL it prints (and the browser it opens) lands on the start page.
lab: $(STAMP) $(LABEXT) course
	env -u PYTHONUNBUFFERED $(BIN)/jupyter lab $(ROOT_FLAG) --ServerApp.root_dir="$(COURSE)" \
		--LabApp.default_url=/lab/tree/00_start.ipynb

lint: $(STAMP)
	$(BIN)/ruff check tfgpu_magic tests benchmarks

bench: $(STAMP)
	env -u PYTHONUNBUFFERED $(BIN)/python benchmarks/bench_import.py
	env -u PYTHONUNBUFFERED $(BIN)/python benchmarks/bench_nvml.py
	env -u PYTHONUNBUFFERED $(BIN)/python benchmarks/bench_placement.py
	env -u PYTHONUNBUFFERED $(BIN)/python benchmarks/bench_cell_overhead.py
	env -u PYTHONUNBUFFERED $(BIN)/python benchmarks/bench_panel_refresh.py
	env -u PYTHONUNBUFFERED $(BIN)/python benchmarks/bench_sidebar_api.py

clean:
	rm -rf .venv .venv-tf* .pytest_cache .ruff_cache node_modules lib tfgpu_magic/labextension tsconfig.tsbuildinfo
