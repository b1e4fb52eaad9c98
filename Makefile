# Two commands do all set-up on a fresh machine: `make demo` and `make test`.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

# The main job: the paper's autoencoder across batch sizes and precisions on whatever device this
# machine has, stored in the default database, ending with the results table (a few minutes on a
# 2-core CPU).
DEMO := autoencoder --batch-size 10,32,128 --epochs 2 --steps-per-epoch 10 --window-steps 1

.PHONY: install demo test lint docs gpu-check clean

install: $(STAMP)

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --disable-pip-version-check -e '.[dev]'
	touch $(STAMP)

demo: install
	$(BIN)/accelbench run $(DEMO)

lint: install
	$(BIN)/ruff check src tests benchmarks scripts
	$(BIN)/ruff format --check src tests benchmarks scripts
	$(BIN)/mypy

# Two workers, a file each at a time (its fixtures made once): CI's machine has two cores. One
# torch thread per process: each worker starts cells of its own, and processes of several
# threads taking turns on shared cores spin (the SIGTERM test took 205 s beside two busy
# processes, 31 s with one thread each). No test measures speed, so nothing is lost.
#
# Bytecode is written as Python does by default: where PYTHONDONTWRITEBYTECODE is set (as on
# this project's machines) nothing wrote that of accelbench's own modules (an editable install
# has none), so each of the suite's 150-odd fresh interpreters compiled them again (0.5 s of CPU
# each), and each worker rewrote the tests' asserts again (7 s of its 16 s collecting).
#
# `accelbench env` first: the versions a fresh install got, so that a failure after a
# dependency's release (transformers 5.25 moved a plan the suite checks) names it in CI's log.
test: lint
	$(BIN)/accelbench env
	PYTHONDONTWRITEBYTECODE= OMP_NUM_THREADS=1 $(BIN)/pytest -q -n 2 --dist loadfile --durations=20

# The docs site (docs/, mkdocs.yml), built strictly: a broken link or reference fails it. The
# suite builds it too (tests/test_docs.py).
docs: install
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --site-dir site

# On a CUDA machine: the gpu-marked tests, the quick suite against published figures and the
# benchmarks, summarised in gpu-check.md (scripts/gpu_check.py).
gpu-check: install
	$(BIN)/python scripts/gpu_check.py --out gpu-check.md

clean:
	rm -rf $(VENV) build site src/*.egg-info
