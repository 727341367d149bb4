# fedlib: install, run the notebooks, build and check the book, run the tests. `make help` lists the targets.
# The two commands of README.md:  make book-from-scratch   and   make install test

PYTHON ?= python3
PIP := $(PYTHON) -m pip
# Extra index for the CPU build of torch where the default index would give the CUDA one, e.g.
# TORCH_INDEX=https://download.pytorch.org/whl/cpu (empty: the configured indexes, as on these machines).
TORCH_INDEX ?=
JOBS ?= 1            # notebooks executed in parallel by `make notebooks`
PYTEST_JOBS ?= 2     # pytest-xdist workers
# Data root of fedlib: ../shared/data when it exists (these machines), else ./data.
FEDLIB_DATA_ROOT ?= $(abspath $(if $(wildcard ../shared/data),../shared/data,data))
export FEDLIB_DATA_ROOT
export MPLBACKEND := Agg


.PHONY: help system-deps install assets notebooks book screenshots lint test test-fast all book-from-scratch publish lab \
        clean paper-dry-run gpu-check

help:
	@echo "make book-from-scratch  install, run the notebooks, build the book, check it (the main job)"
	@echo "make install test       install, then run the tests"
	@echo "make test-fast          the tests not marked slow (under a minute; make test runs them all)"
	@echo "make lab                open the notebooks in JupyterLab (live widgets)"
	@echo "make publish            put _build/html on the gh-pages branch and push it (PUSH=0: local branch only)"
	@echo "targets: install assets notebooks book screenshots test test-fast all publish lab clean"

# torch first, pinned: installed after other packages, an unpinned torch would come as the CUDA build.
# system-deps first: the tests open pages in Chromium (the page check, JupyterLab).
install: system-deps
	$(PIP) install torch==2.13.0 $(if $(TORCH_INDEX),--extra-index-url $(TORCH_INDEX))
	$(PIP) install torchvision==0.28.0 $(if $(TORCH_INDEX),--extra-index-url $(TORCH_INDEX))
	@# this checkout was once the distribution "fedlib": an editable install of it left behind would map
	@# the import name fedlib to wherever that checkout was; only an editable install of ours is removed
	@if $(PYTHON) -m pip show fedlib 2>/dev/null | grep -q "^Editable project location"; then \
	  $(PIP) uninstall -y fedlib; fi
	$(PIP) install -e ".[train,test,book]"

# The ipywidgets and MathJax JavaScript, served from the book (build/web-assets, not in git; needs npm).
assets:
	$(PYTHON) scripts/fetch_web_assets.py

# Every cell runs under a time limit (CELL_TIMEOUT seconds); a page that times out runs once more, then fails.
CELL_TIMEOUT ?= 600
notebooks:
	$(PYTHON) scripts/run_notebooks.py --jobs $(JOBS) --cell-timeout $(CELL_TIMEOUT)

# -W: warnings are errors; -n: nitpicky (every reference must resolve); --keep-going: report all of them.
book: assets
	rm -rf _build
	$(PYTHON) -c "from jupyter_book.cli.main import main; main()" build . -W -n --keep-going

# Every page in headless Chromium with no network; then every static slider is moved and must change its figure.
screenshots:
	$(PYTHON) scripts/screenshots.py
	$(PYTHON) scripts/check_frame_slider.py
	$(PYTHON) scripts/check_frame_slider.py --screenshots screenshots/sliders book/executed/explorer.ipynb

# pytest exits 5 when it collected no tests: that is a failure here, not a silent success.
# The notebooks run too: with their `smoke` parameters injected (runs.yaml), executed by nbval (--nbval-lax:
# cells must run without error; outputs are not compared). --dist loadfile keeps each notebook on one worker.
# ruff's lint rules and formatter (pyproject.toml), before any test
lint:
	$(PYTHON) -m ruff check .
	$(PYTHON) -m ruff format --check .

test: lint
	rm -rf build/smoke && $(PYTHON) scripts/run_notebooks.py --smoke --prepare-only --out-dir build/smoke
	$(PYTHON) -m pytest -n $(PYTEST_JOBS) --dist loadfile tests build/smoke --nbval-lax; rc=$$?; \
	if [ $$rc -eq 5 ]; then echo "pytest collected no tests: failing" >&2; exit 1; fi; exit $$rc

# The everyday loop (under a minute on 2 cores): the tests not marked slow, no lint, no notebooks. `make test` runs all.
test-fast:
	$(PYTHON) -m pytest -n $(PYTEST_JOBS) -m "not slow" tests; rc=$$?; \
	if [ $$rc -eq 5 ]; then echo "pytest collected no tests: failing" >&2; exit 1; fi; exit $$rc

# Every group of the paper tier for one round on tiny fake files, on the CPU (minutes), then its size and cost.
paper-dry-run:
	$(PYTHON) -m fedlib paper --dry-run --small-images

# First thing on a GPU machine: the CUDA tests, the benchmarks, a record in benchmarks/results/ (~5-10 min).
gpu-check:
	$(PYTHON) -m fedlib gpu-check

all: notebooks book screenshots test

book-from-scratch: install
	$(MAKE) notebooks book screenshots

# npm (for the offline JavaScript) and Chromium (for the page check), from Debian when missing and we are root.
system-deps:
	@missing=""; command -v npm >/dev/null || missing="$$missing npm"; \
	command -v chromium >/dev/null || command -v chromium-browser >/dev/null || command -v google-chrome >/dev/null || missing="$$missing chromium"; \
	if [ -n "$$missing" ]; then \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing; \
	  else echo "install$$missing first (e.g. apt-get install -y$$missing)" >&2; exit 1; fi; \
	fi

# The notebooks with live widgets, in JupyterLab (open notebooks/explorer.ipynb and run all cells).
lab:
	PYTHONPATH=$(CURDIR) $(PYTHON) -m jupyterlab notebooks

# The built book onto the gh-pages branch (.nojekyll: keep the _static folders), pushed to origin unless PUSH=0.
# .github/workflows/book.yml is the other way: GitHub Actions builds and deploys it to GitHub Pages.
PUSH ?= 1
publish:
	@test -f _build/html/index.html || { echo "no _build/html/index.html: run make book (or make book-from-scratch) first" >&2; exit 1; }
	$(PYTHON) -m ghp_import --no-jekyll --force --branch gh-pages \
	  --message "Book built from $$(git rev-parse --short HEAD)" $(if $(filter 1,$(PUSH)),--push) _build/html

clean:
	rm -rf _build book/executed screenshots
