# tff_flare: `make demo` runs the embedded demo, `make test` the test suite.
# Both first run `make install`, which creates .venv and installs the locked requirements.

PYTHON ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
# TensorFlow's C++ log lines are noise here (TF_CPP_MIN_LOG_LEVEL=0 brings them back).
export TF_CPP_MIN_LOG_LEVEL ?= 3
export PYTHONUNBUFFERED := 1

.PHONY: install kernels demo lint format test benchmark worker clean bazel-test

PORT ?= 8000

install: $(STAMP) kernels

# FLARE's selection kernels for the in-process mode (tff_flare/algorithms/selection.py); without
# them that mode runs the same selections as TensorFlow ops, with the same results, slower.
KERNELS := tff_flare/algorithms/kernels/magnitude_ops.so
kernels: $(KERNELS)

$(KERNELS): tff_flare/algorithms/kernels/magnitude_ops.cc $(STAMP)
	$(CXX) -O3 -march=x86-64-v2 -shared -fPIC $< -o $@ \
	  $$($(BIN)/python -c "import tensorflow as tf; print(' '.join(tf.sysconfig.get_compile_flags() + tf.sysconfig.get_link_flags()))" 2>/dev/null) \
	  || { rm -f $@; echo "warning: $@ not built; the in-process mode uses TensorFlow ops instead"; }

$(STAMP): requirements.txt pyproject.toml
	@command -v $(PYTHON) >/dev/null || { echo "$(PYTHON) not found; run make PYTHON=/path/to/python3.11"; exit 1; }
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet --no-deps -r requirements.txt
	# The repository itself goes on the venv's path (an editable install without a build step).
	$(BIN)/python -c "import site, pathlib; pathlib.Path(site.getsitepackages()[0], 'tff_flare_repo.pth').write_text('$(CURDIR)\n')"
	$(BIN)/python -c "from tff_flare.execution import cleanup; cleanup.mute_tff_shutdown_noise(); import tensorflow_federated as tff; print('installed TFF', tff.__version__)"
	touch $(STAMP)

demo: install
	$(BIN)/python -m experiments.demo

# One pytest worker per CPU (pytest-xdist; worksteal balances the long tests).
TEST_WORKERS ?= $(shell nproc 2>/dev/null || echo 2)
# The linter, the layout and the types (pyproject.toml's [tool.ruff], [tool.yapf], [tool.mypy]):
# about a minute; the tests run after they pass. `make format` lays the code out as yapf wants.
SOURCES := tff_flare experiments tests benchmarks tools
lint: install
	$(BIN)/ruff check .
	$(BIN)/yapf --diff --recursive --parallel $(SOURCES) || { echo "make format lays these out"; exit 1; }
	$(BIN)/mypy

format: install
	$(BIN)/yapf --in-place --recursive --parallel $(SOURCES)

test: lint
	$(BIN)/python -m pytest -q -rs -n $(TEST_WORKERS) --dist=worksteal tests $(PYTEST_ARGS)

benchmark: install
	$(BIN)/python -m benchmarks.round_time

# A TFF worker for --execution=remote --workers=<this host>:$(PORT) (Ctrl-C stops it).
worker: install
	$(BIN)/python -m experiments.worker --port=$(PORT)

clean:
	rm -rf $(VENV) $(KERNELS)

# Offline `bazel test` with Debian's Bazel 4.2 (apt-get install bazel-bootstrap bazel-rules-java):
# Python comes from .venv (tools/BUILD); of the repositories Bazel would download, rules_java
# comes from Debian and two are replaced by the stand-ins in third_party/bazel.
BAZEL_FLAGS := --override_repository=rules_cc=$(CURDIR)/third_party/bazel/rules_cc \
	--override_repository=remote_coverage_tools=$(CURDIR)/third_party/bazel/remote_coverage_tools \
	--override_repository=rules_java=/usr/share/bazel/rules/java

bazel-test: install
	bazel test $(BAZEL_FLAGS) --local_test_jobs=1 //...
