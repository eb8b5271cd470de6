# robofollow_ros — the two commands at the top of the README, and their helpers.
#   make demo   set up, then run the main job (sim-in-the-loop dry run over ROS, then the mirage)
#   make test   set up, then run the whole test suite (CI runs exactly this)
PY := .venv/bin/python
ROBOFOLLOW := .venv/bin/robofollow
# The demo's options (robofollow demo --help): FOXGLOVE_PORT=N is --foxglove-port N (0 picks a free port),
# DEMO_ARGS is passed as written, e.g. make demo FOXGLOVE_PORT=0 DEMO_ARGS="--per-group 1 --output /tmp/demo"
FOXGLOVE_PORT ?=
DEMO_ARGS ?=

.PHONY: setup setup-tests setup-lerobot setup-matrix test test-matrix demo lint bench clean

setup:
	@bash tools/setup_env.sh

# The tests' own environments (.venv-reader, .venv-vlaeval, .venv-olddeps) and Debian's chromium.
setup-tests: setup
	@bash tools/setup_test_envs.sh

# LeRobot's own environment (.venv-lerobot: lerobot 0.4.4 + torch 2.10 from PyPI, ~7 min and ~8 GB the
# first time), for test_model_server_lerobot.py, which is skipped without it. Not part of `setup` (so not
# of CI) because of that cost; to enable it in CI, call tools/setup_lerobot_env.sh from tools/setup_env.sh.
setup-lerobot:
	@bash tools/setup_lerobot_env.sh

# Two phases (pyproject.toml, [tool.pytest.ini_options]): the suite on two workers, then the tests that assert
# wall-clock bounds alone (exit 5, no test selected in a phase, is not a failure). PYTEST_ARGS narrows both, e.g. make test PYTEST_ARGS="test/test_registry.py".
PYTEST_ARGS ?=
test: setup-tests
	$(PY) -m pytest -q -n 2 --dist loadfile -m "not exclusive" $(PYTEST_ARGS) || test $$? -eq 5
	$(PY) -m pytest -q -m exclusive $(PYTEST_ARGS) || test $$? -eq 5

# The CI matrix (after make test in .ci/run): .venv-py310 and .venv-py312 (Jazzy's wheels, no torch/ray) run the
# ROS-free core's tests and the ROS-graph smoke, .venv-kilted (Kilted's wheels) the smoke; README, "Tested here".
setup-matrix:
	@bash tools/setup_matrix_envs.sh

test-matrix:
	@bash tools/test_matrix.sh

demo: setup
	$(ROBOFOLLOW) demo$(if $(FOXGLOVE_PORT), --foxglove-port $(FOXGLOVE_PORT))$(if $(DEMO_ARGS), $(DEMO_ARGS))

lint: setup
	.venv/bin/ruff check robofollow_ros test bench model_server
	.venv/bin/mypy

bench: setup
	@for script in bench/*.py; do echo "==> $$script"; $(PY) $$script || exit 1; done

clean:
	rm -rf .venv .venv-reader .venv-vlaeval .venv-olddeps .venv-lerobot .venv-py310 .venv-py312 .venv-py313 .venv-kilted build install log *.egg-info .pytest_cache .mypy_cache .ruff_cache
