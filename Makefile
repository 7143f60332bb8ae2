# tff_flare: `make demo` runs the embedded demo, `make test` the test suite.
# Both first run `make install`, which creates .venv and installs the locked requirements.

PYTHON ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
export TF_CPP_MIN_LOG_LEVEL ?= 2
export PYTHONUNBUFFERED := 1

.PHONY: install demo test benchmark clean

install: $(STAMP)

$(STAMP): requirements.txt pyproject.toml
	@command -v $(PYTHON) >/dev/null || { echo "$(PYTHON) not found; run make PYTHON=/path/to/python3.11"; exit 1; }
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet --no-deps -r requirements.txt
	# The repository itself goes on the venv's path (an editable install without a build step).
	$(BIN)/python -c "import site, pathlib; pathlib.Path(site.getsitepackages()[0], 'tff_flare_repo.pth').write_text('$(CURDIR)\n')"
	$(BIN)/python -c "import tensorflow_federated as tff, tff_flare; print('installed TFF', tff.__version__)"
	touch $(STAMP)

demo: install
	$(BIN)/python -m tff_flare.demo

test: install
	$(BIN)/python -m pytest -q tests

benchmark: install
	$(BIN)/python -m benchmarks.round_time

clean:
	rm -rf $(VENV)
