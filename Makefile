# Counterfactual Atlas: `make run` starts the app, `make test` runs every test.
# Both create .venv and install what they need on a fresh machine.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
PORT   ?= 8501

.PHONY: run test test-main test-next next-install lint install install-dev chromium postgresql debian-packages bench clean

# uv installs the same pinned requirements as pip, with the same compiled bytecode, in about
# half the time (a fresh clone here: 19 s against pip's 37 s for both files, uv's cache empty).
# Where uv cannot run or reach its index (pip configured for a private one), pip does it.
UV_VERSION ?= 0.13.9
# $(1): a requirements file; $(2): uv's own options (the project's editable install is rebuilt
# on every install, as pip does, since uv would keep it while only a C source changed).
INSTALL     = { $(VENV)/bin/uv pip install -q --system-certs --compile-bytecode --python $(PY) -r $(1) $(2) || \
                { echo "uv could not install $(1); installing with pip" >&2; $(PY) -m pip install -q -r $(1); }; }

$(VENV)/bin/python:
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q uv==$(UV_VERSION) || echo "uv is not available: pip installs the requirements" >&2

KERNELS = core/model/_treewalk.c core/rules/_projected.c core/solvers/_boxsearch.c core/intake/parsing/_wire.c
$(VENV)/.runtime: $(VENV)/bin/python requirements.txt pyproject.toml setup.py $(KERNELS)
	$(call INSTALL,requirements.txt,--reinstall-package counterfactual-atlas)
	touch $@

$(VENV)/.dev: $(VENV)/.runtime requirements-dev.txt requirements-tests.txt
	$(call INSTALL,requirements-dev.txt)
	touch $@

install: $(VENV)/.runtime
install-dev: $(VENV)/.dev

run: install
	$(VENV)/bin/streamlit run dashboard/app.py --server.port $(PORT)

# Browser tests drive Debian's Chromium (Playwright cannot download a browser here): its headless
# shell where it is installed, the same Chromium without the desktop interface, at about three
# fifths of the browser's CPU a view costs (tests/conftest.py, CHROMIUM_BUILDS); else the desktop build.
# Graphviz's `dot` renders the tree figures' SVG/PNG exports (tested).
# Debian packages are installed where this user can (root, apt): from the package lists as they
# are, else after updating them.
CAN_APT     = [ "$$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1
APT_INSTALL = { DEBIAN_FRONTEND=noninteractive apt-get install -y -q $(1) >/dev/null 2>&1 || \
                { apt-get update -q >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -q $(1) >/dev/null; }; }
chromium:
	@if command -v chromium >/dev/null 2>&1 || [ -x "$${CHROMIUM_PATH:-/usr/bin/chromium}" ]; then :; \
	elif $(CAN_APT); then \
		echo "Installing Debian's chromium for the browser tests…"; \
		$(call APT_INSTALL,chromium); \
	else \
		echo "Chromium is missing and this user cannot install it: run 'sudo apt-get install chromium'" \
		     "(or set CHROMIUM_PATH to a Chromium binary), then 'make test' again." >&2; exit 1; \
	fi
	@if [ -n "$${CHROMIUM_PATH:-}" ] || command -v chromium-headless-shell >/dev/null 2>&1; then :; \
	elif $(CAN_APT); then \
		echo "Installing Debian's chromium-headless-shell for the browser tests…"; \
		$(call APT_INSTALL,chromium-headless-shell) 2>/dev/null || \
		echo "chromium-headless-shell could not be installed: the browser tests drive chromium (slower)" >&2; \
	else \
		echo "Note: 'sudo apt-get install chromium-headless-shell' makes the browser tests lighter" >&2; \
	fi
	@if command -v dot >/dev/null 2>&1; then :; \
	elif $(CAN_APT); then \
		echo "Installing Debian's graphviz for the figure exports…"; \
		$(call APT_INSTALL,graphviz); \
	else \
		echo "Graphviz is missing and this user cannot install it: run 'sudo apt-get install graphviz'," \
		     "then 'make test' again." >&2; exit 1; \
	fi

# The history tests run on PostgreSQL as well as SQLite (tests/pgcluster.py starts a throwaway
# cluster of Debian's server binaries, initdb and pg_ctl, as the postgres user when run as root).
postgresql:
	@if ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || command -v initdb >/dev/null 2>&1 || \
	    [ -x "$${ATLAS_PG_BIN:-/nonexistent}/initdb" ]; then :; \
	elif $(CAN_APT); then \
		echo "Installing Debian's postgresql for the history tests…"; \
		$(call APT_INSTALL,postgresql); \
	else \
		echo "PostgreSQL's server binaries are missing and this user cannot install them: run" \
		     "'sudo apt-get install postgresql' (or set ATLAS_PG_BIN to the folder holding initdb)," \
		     "then 'make test' again." >&2; exit 1; \
	fi

# Debian's packages the tests need, one after the other (apt and dpkg take one lock at a time).
debian-packages:
	@$(MAKE) --no-print-directory chromium
	@$(MAKE) --no-print-directory postgresql

# mypy checks core, dashboard and pages on every core (`-n`), then counts the findings of
# `mypy --strict` against pyproject's ceiling (tests/strict_types.py).
CORES ?= $(shell nproc 2>/dev/null || echo 1)
MYPY_WORKERS ?= $(CORES)
lint: install-dev
	$(VENV)/bin/ruff check .
	$(VENV)/bin/mypy -n $(MYPY_WORKERS)
	$(PY) tests/strict_types.py $(MYPY_WORKERS)

# One worker more than cores (pytest-xdist), a test file's tests on one worker (`--dist
# loadfile`), so a module-scoped fixture (a browser module's app server, a fitted model) is
# built once, as in one process; the 25 slowest steps (setup, call) are listed at the end.
# The extra worker fills the time a browser test waits on its app and Chromium: on 2 cores,
# 2 workers took 31.3 min, 3 took 26.0 and 4 took 24.6 (one run each, same commit, a slow
# machine); on a quiet one 3 took 11.5 min and 4 took 11.4, the two cores busy. Files start in
# conftest's order, the longest first (`--no-loadscope-reorder`: xdist would sort them by
# their number of tests, and the run ended on the single-test browser files).
# (`--dist loadgroup` would split files further, but xdist 3.8.0's groups are lost with
# pytest 9.2: all tests ran as ungrouped.) TEST_WORKERS=0 runs them all in this process.
# Debian's Chromium and PostgreSQL are installed (on a fresh machine) while uv installs and the lint runs.
#
# `make test` installs first (uv, Debian's packages and the Python 3.12 venv at once), then runs
# the lint, the tests and the tests on Python 3.12 at the same time: the lint (one mypy worker)
# and the 3.12 run (one pytest worker) use the CPU the main run leaves while its browser tests
# wait on their app and Chromium, and the main run no longer waits for the lint. Each part's
# output is printed whole when it ends (`--output-sync`); make fails if any part fails.
TEST_WORKERS ?= $(shell echo $$(( $(CORES) + 1 )))
# The project's modules compiled before a run, as uv compiles the libraries' (`--compile-bytecode`):
# where PYTHONDONTWRITEBYTECODE is set (these machines), every interpreter of a run (the test
# workers, each app server, each fork server, each spawned worker) compiled core again on import,
# about 0.4 CPU-s each (intake and two browser modules: 260-268 against 246-257 CPU-s, in turn).
# Only what changed since the last run is compiled again; a stale file is still read from source.
COMPILE     = $(1) -m compileall -q -j 0 core dashboard pages tests >/dev/null
test:
	@$(MAKE) --no-print-directory -j3 install-dev debian-packages next-install
	@echo "Running the lint, the tests, and the library's tests on Python 3.12 at once; each one's output follows when it ends…"
	@$(MAKE) --no-print-directory -j3 --output-sync=target lint test-main test-next MYPY_WORKERS=1 NEXT_WORKERS=1
test-main: install-dev
	$(call COMPILE,$(PY))
	$(PY) -m pytest -q -p no:cacheprovider -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder --durations=25

# The second Python version claimed (pyproject: >=3.11): the library's tests on Python 3.12, in a
# venv of its own with the same pinned requirements and the test runner (requirements-tests.txt).
# Its install runs beside uv's; its tests beside the main run: the readme's example of every
# analysis, the models' readings and their oracles, the optimum against brute force, the
# packaging. Python 3.12 is found on PATH, then in pyenv's versions; PYTHON_NEXT names another.
PYTHON_NEXT ?= python3.12
VENV_NEXT   ?= .venv-py312
NEXT_TESTS  ?= -k "not wheel" tests/test_readme.py tests/model tests/kernel/test_optimal.py tests/analyses/test_rules_api.py \
               tests/test_packaging.py
FIND_NEXT    = for p in "$$(command -v $(PYTHON_NEXT) 2>/dev/null)" $(PYTHON_NEXT) \
                        $${PYENV_ROOT:-$$HOME/.pyenv}/versions/3.12*/bin/python3.12 /usr/local/bin/python3.12; do \
                   [ -n "$$p" ] && "$$p" -c 'import sys; assert sys.version_info[:2] == (3, 12)' >/dev/null 2>&1 && \
                   { echo "$$p"; break; }; done
$(VENV_NEXT)/bin/python: $(VENV)/bin/python
	@py="$$($(FIND_NEXT))"; \
	if [ -z "$$py" ]; then \
		echo "Python 3.12 is not installed: make test runs the library's tests on it too. Install it" \
		     "(e.g. 'pyenv install 3.12' or 'apt-get install python3.12'), or set PYTHON_NEXT to its interpreter." >&2; \
		exit 1; \
	fi; \
	$(VENV)/bin/uv venv -q --python "$$py" $(VENV_NEXT) 2>/dev/null || "$$py" -m venv $(VENV_NEXT)
$(VENV_NEXT)/.tests: $(VENV)/.runtime $(VENV_NEXT)/bin/python requirements.txt requirements-tests.txt pyproject.toml \
                     setup.py $(KERNELS)
	@{ $(VENV)/bin/uv pip install -q --system-certs --compile-bytecode --python $(VENV_NEXT)/bin/python \
	     -r requirements.txt -r requirements-tests.txt --reinstall-package counterfactual-atlas || \
	   { $(VENV_NEXT)/bin/python -m ensurepip -q 2>/dev/null; \
	     $(VENV_NEXT)/bin/python -m pip install -q -r requirements.txt -r requirements-tests.txt; }; }
	touch $@
next-install: $(VENV_NEXT)/.tests
NEXT_WORKERS ?= $(TEST_WORKERS)
test-next: next-install
	$(call COMPILE,$(VENV_NEXT)/bin/python)
	$(VENV_NEXT)/bin/python -m pytest -q -p no:cacheprovider -n $(NEXT_WORKERS) --dist loadfile $(NEXT_TESTS)

bench: install-dev
	@for b in bench/*.py; do echo "== $$b"; $(PY) $$b || exit 1; done

clean:
	rm -rf $(VENV) $(VENV_NEXT) .pytest_cache build *.egg-info
