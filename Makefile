# Every target that runs code depends on .venv, so a fresh clone needs only
# python3.11 and make.
PYTHON ?= python3.11
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed

.PHONY: install selfplay test bench lint clean

install: $(STAMP)

$(STAMP): pyproject.toml
	@command -v $(PYTHON) >/dev/null 2>&1 || { echo "error: $(PYTHON) not found; set PYTHON=/path/to/python3.11"; exit 1; }
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

# A second `make selfplay` continues (or reports complete) the run in $(RUN).
RUN ?= runs/cpu
selfplay: $(STAMP)
	$(PY) -m experiments.selfplay --preset cpu --out $(RUN) $(if $(wildcard $(RUN)/config.json),--resume) $(ARGS)

test: $(STAMP)
	$(PY) -m pytest -n 2 -q $(ARGS)

bench: $(STAMP)
	$(PY) -m experiments.bench $(ARGS)

lint: $(STAMP)
	$(VENV)/bin/ruff check src experiments tests

clean:
	rm -rf $(VENV) .pytest_cache runs
