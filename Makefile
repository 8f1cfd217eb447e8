# `make lab` sets up and opens the course; `make test` sets up and runs every test. Each works on a fresh machine
# with Python 3.10+, make and Node.js 20.19+ (which builds the sidebar); the tests need gcc too (the fake NVML).
PYTHON ?= python3
# `make test TF=2.16.2` (optionally PYTHON=python3.10) runs the suite against another TensorFlow in its
# own environment, .venv-tf2.16.2; pip resolves the rest to versions that work with it.
TF ?=
# `make lab GPU=1` installs a CUDA TensorFlow (tensorflow[and-cuda]) in place of tensorflow-cpu; a later `make lab`
# keeps it, and `make lab GPU=` goes back to tensorflow-cpu.
GPU ?= $(if $(wildcard $(if $(TF),.venv-tf$(TF),.venv)/.lab-cuda-stamp),1)
CUDA := $(filter 1 yes true on,$(GPU))
# `make lab LAB_ARGS="--no-browser --port 8888"`: more options for `jupyter lab` (a remote server, say).
LAB_ARGS ?=
VENV := $(if $(TF),.venv-tf$(TF),.venv)
BIN := $(VENV)/bin
TF_VERSION := $(if $(TF),==$(TF),>=2.13)
# tensorflow-cpu has wheels for x86-64 Linux (and Windows) only; elsewhere (a Mac, ARM Linux) `tensorflow` is the
# CPU build.
CPU_DIST := $(if $(and $(filter Linux,$(shell uname -s)),$(filter x86_64,$(shell uname -m))),tensorflow-cpu,tensorflow)
TF_CPU := "$(CPU_DIST)$(TF_VERSION)"
TF_CUDA := "tensorflow[and-cuda]$(TF_VERSION)"

# What is installed, one stamp each. The tests' install holds the CPU course's, never the other way round, so
# `make lab` reuses what `make test` installed and `make test` after `make lab` installs the test tools.
STAMP := $(VENV)/.installed-stamp
LAB_STAMP_CPU := $(VENV)/.lab-cpu-stamp
LAB_STAMP_CUDA := $(VENV)/.lab-cuda-stamp
LAB_STAMP := $(if $(CUDA),$(LAB_STAMP_CUDA),$(LAB_STAMP_CPU))
GOALS := $(or $(MAKECMDGOALS),setup)
# The sidebar is built in the environment the goals install: the course's for `make lab`, else the tests'.
INSTALL := $(if $(filter-out lab course,$(GOALS)),$(STAMP),$(LAB_STAMP))

ifneq ($(CUDA),)
ifneq ($(origin GPU),file)
ifneq ($(filter-out lab course,$(GOALS)),)
$(error GPU=1 is for `make lab` only: the tests run tensorflow-cpu, which `make test` puts in place of the CUDA one)
endif
endif
endif

.DEFAULT_GOAL := setup
.PHONY: setup test test-fast lab course lint bench clean

# One line per step, so an install of several minutes is never silent.
SAID = make $(firstword $(GOALS)):
SAY = @echo "$(SAID)"
# Not pip's root warning (CI and containers are root) nor its new-version notice: neither concerns the user here.
PIP = PIP_ROOT_USER_ACTION=ignore PIP_DISABLE_PIP_VERSION_CHECK=1 $(abspath $(BIN))/python -m pip

NODE_CHECK = node -e 'const [a,b]=process.versions.node.split(".").map(Number); process.exit(a>20||(a==20&&b>=19)?0:1)' \
	|| { echo "make: the sidebar is built with Node.js 20.19 or newer (found: $$(node --version 2>/dev/null || echo none))"; exit 1; }
PYTHON_CHECK = $(PYTHON) -c 'import sys; sys.exit(sys.version_info < (3, 10))' \
	|| { echo "make: tfgpu_magic needs Python 3.10 or newer (found: $$($(PYTHON) --version 2>&1)); try PYTHON=python3.11"; exit 1; }

# A TensorFlow flavour goes before the other comes: tensorflow and tensorflow-cpu both own the `tensorflow` package
# folder, and pip installs one over the other without removing it.
# Both present (pip installed one over the other) means neither is whole: both go, and the wanted one comes anew.
OTHER_THAN_CPU := $(if $(filter tensorflow-cpu,$(CPU_DIST)),tensorflow,tensorflow-cpu)
REMOVE = if $(PIP) show -q $(1) 2>/dev/null; then \
	echo "$(SAID) removing $(1), as $(2) goes in its place (both are the tensorflow package)"; \
	$(PIP) uninstall -y -q $(1); if $(PIP) show -q $(2) 2>/dev/null; then $(PIP) uninstall -y -q $(2); fi; fi
# `jupyter labextension develop` links the sidebar from the working tree; pip's uninstall of an earlier install
# would reach through that link into the tree, so the link goes first.
LINK := $(VENV)/share/jupyter/labextensions/tfgpu_magic
UNLINK = if [ -L $(LINK) ]; then rm $(LINK); fi
# The sidebar is built below with jlpm (as the build hook would), where its progress can be said.
PIP_INSTALL = $(UNLINK); SKIP_JUPYTER_BUILDER=1 $(PIP) install -e
# Where each module is, not an import: importing TensorFlow here would print its start-up notices.
CHECK = $(BIN)/python -c 'import importlib.util as u, importlib.metadata as m, sys; \
	missing = [n for n in sys.argv[1:] if u.find_spec(n) is None]; \
	tf = sorted({n for d in m.distributions() if (n := d.name.lower().replace("_", "-")) in ("tensorflow", "tensorflow-cpu")}); \
	sys.exit(f"make: the install lacks {missing}") if missing else print("$(SAID) installed", *(f"{n} {m.version(n)}" for n in tf))'

$(BIN)/python:
	@$(PYTHON_CHECK)
	$(SAY) "creating $(VENV) (a Python environment of its own)"
	@$(PYTHON) -m venv $(VENV)
	@$(PIP) install -q --upgrade pip

$(STAMP): pyproject.toml | $(BIN)/python
	@$(NODE_CHECK)
	@$(call REMOVE,$(OTHER_THAN_CPU),$(CPU_DIST))
	$(SAY) "installing JupyterLab, TensorFlow (CPU) and the test tools (a few minutes)"
	@$(PIP_INSTALL) ".[test,lab,bench]" $(TF_CPU)
	@$(CHECK) tfgpu_magic tensorflow IPython nbclient jupyterlab jupyter_server
	@rm -f $(LAB_STAMP_CUDA)
	@touch $(LAB_STAMP_CPU) $@

$(LAB_STAMP_CPU) $(LAB_STAMP_CUDA): pyproject.toml | $(BIN)/python
	@$(NODE_CHECK)
	@$(call REMOVE,$(if $(CUDA),tensorflow-cpu,$(OTHER_THAN_CPU)),$(if $(CUDA),tensorflow,$(CPU_DIST)))
	$(SAY) "installing JupyterLab and TensorFlow$(if $(CUDA), with CUDA,) (a few minutes)"
	@$(PIP_INSTALL) ".[lab]" $(if $(CUDA),$(TF_CUDA),$(TF_CPU))
	@$(CHECK) tfgpu_magic tensorflow IPython jupyterlab jupyter_server
	@# The other flavour's stamps no longer hold; the tests' neither, after a switch of flavour.
	@rm -f $(filter-out $@,$(LAB_STAMP_CPU) $(LAB_STAMP_CUDA)) $(if $(CUDA),$(STAMP))
	@touch $@

# Built after every install (which leaves it out) and when a source changed since; JupyterLab then reads it from the
# working tree (a link), so `make` after an edit is enough.
LABEXT := tfgpu_magic/labextension/package.json
LABEXT_SOURCES := package.json tsconfig.json yarn.lock $(wildcard labextension/src/*.ts labextension/src/model/*.ts labextension/style/* labextension/schema/*.json)
JLPM = PATH="$(abspath $(BIN)):$$PATH" $(abspath $(BIN))/jlpm
# A step's own output is kept in a log and shown only when it fails.
QUIET = >$(VENV)/last-step.log 2>&1 || { cat $(VENV)/last-step.log; exit 1; }
$(LABEXT): $(LABEXT_SOURCES) $(INSTALL)
	@$(NODE_CHECK)
	$(SAY) "building the sidebar (about a minute)"
	@$(JLPM) install $(QUIET)
	@$(JLPM) build $(QUIET)
	@PATH="$(abspath $(BIN)):$$PATH" $(BIN)/jupyter labextension develop --overwrite . $(QUIET)
	@touch $(LABEXT)

# JupyterHub's proxy for tests/hub (a real Hub on loopback): from npm, into the venv, so `make clean` removes it.
CHP_VERSION := 5.3.0
CHP := $(VENV)/chp/node_modules/.bin/configurable-http-proxy
$(CHP): | $(STAMP)
	npm install --silent --no-audit --no-fund --prefix $(VENV)/chp configurable-http-proxy@$(CHP_VERSION) >/dev/null

setup: $(STAMP) $(LABEXT) $(CHP)

# PYTHONUNBUFFERED hides the C-level buffering bugs users hit in kernels: tests run without it.
# The frontend's model tests (labextension/test, node --test) run inside pytest: tests/frontend/test_sidebar_model.py.
# Two passes, each on two workers with a file's tests together (a module's server, kernel or Lab starts once):
# everything but the browser and the Hub, then the browser and Hub tests, two modules at once. Their checks wait for
# what they look for, with timeouts far above what a busy page takes, so a slower page is not a failure; one module
# at a time they took 20 of CI's 30 minutes, two at once 12.
# The slowest tests of each pass are listed at its end (--durations): where to look when the run grows.
test: $(STAMP) $(LABEXT) $(CHP)
	env -u PYTHONUNBUFFERED $(BIN)/ruff check tfgpu_magic tests benchmarks
	env -u PYTHONUNBUFFERED $(BIN)/python -m pytest -m "not browser and not hub" -n 2 --dist loadfile --durations=15
	env -u PYTHONUNBUFFERED $(BIN)/python -m pytest -m "browser or hub" -n 2 --dist loadfile --durations=25

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

course:
	$(SAY) "copying the course into $(COURSE)/"
	@$(PYTHON) notebooks/prepare_course.py "$(COURSE)"

# The server's root is the working copy; the URL it prints (and the browser it opens) lands on the start page.
lab: $(LAB_STAMP) $(LABEXT) course
	$(SAY) "starting JupyterLab on $(COURSE)/00_start.ipynb (Ctrl-C twice stops it)"
	@env -u PYTHONUNBUFFERED $(BIN)/jupyter lab $(ROOT_FLAG) --ServerApp.root_dir="$(COURSE)" \
		--LabApp.default_url=/lab/tree/00_start.ipynb $(LAB_ARGS)

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
