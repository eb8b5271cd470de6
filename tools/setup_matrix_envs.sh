#!/usr/bin/env bash
# The CI matrix's venvs (make test-matrix; tools/test_matrix.sh runs the tests in them), each idempotent (a stamp):
#   .venv-py310   Python 3.10 (Humble's, Ubuntu 22.04) with Jazzy's wheels
#   .venv-py312   Python 3.12 (Jazzy's, Ubuntu 24.04) with Jazzy's wheels
#   .venv-kilted  Python 3.11 with Kilted's wheels (requirements-kilted.txt)
# Each is requirements.txt composed with its overlay (tools/compose_requirements.py) WITHOUT torch, ray and the
# test-only packages of tests outside the matrix (MATRIX_DROP), then the package (editable, no deps), and
# tf2_msgs, which PyPI lacks (tools/build_ros_msgs.sh). No SAPIEN renderer: the matrix's trials run with --no-render.
#
#   bash tools/setup_matrix_envs.sh                 # all three
#   bash tools/setup_matrix_envs.sh py310 kilted    # some
#
# The interpreters come from the image's pyenv (PYENV_ROOT, default /root/.pyenv: 3.10.13, 3.11.7, 3.12.1 and
# 3.13.0); a missing one fails with one line naming it.
set -euo pipefail
cd "$(dirname "$0")/.."

PYENV_ROOT=${PYENV_ROOT:-/root/.pyenv}
MATRIX_DROP=(torch ray ros2-numpy mujoco-core playwright ruff mypy)

interpreter() {  # NAME -> the interpreter's path
  case "$1" in
    py310) echo "$PYENV_ROOT/versions/3.10.13/bin/python3.10" ;;
    py312) echo "$PYENV_ROOT/versions/3.12.1/bin/python3.12" ;;
    py313) echo "$PYENV_ROOT/versions/3.13.0/bin/python3.13" ;;
    kilted) echo "$PYENV_ROOT/versions/3.11.7/bin/python3.11" ;;
    *) echo "error: matrix venv '$1': expected py310, py312, py313 or kilted" >&2; return 2 ;;
  esac
}

overlay() {  # NAME -> the overlay file
  case "$1" in kilted) echo requirements-kilted.txt ;; *) echo requirements-matrix.txt ;; esac
}

setup_one() {
  local name=$1 python venv stamp want reqs start
  python=$(interpreter "$name") || exit 2
  [ -x "$python" ] || { echo "error: $name needs $python (the CI image's pyenv interpreter), which is missing" >&2
                        exit 1; }
  venv=.venv-$name
  start=$(date +%s)
  [ -x "$venv/bin/python" ] || { echo "==> creating $venv with $("$python" --version)"; "$python" -m venv "$venv"; }
  stamp="$venv/.robofollow-deps"
  want=$(cat requirements.txt "$(overlay "$name")" requirements-data.txt setup.py package.xml \
           tools/compose_requirements.py "$0" | sha256sum | cut -d' ' -f1)
  if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
    echo "==> installing $venv's dependencies (requirements.txt + $(overlay "$name"), without ${MATRIX_DROP[*]})"
    reqs="$venv/requirements-composed.txt"
    python3 tools/compose_requirements.py requirements.txt "$(overlay "$name")" --drop "${MATRIX_DROP[@]}" > "$reqs"
    "$venv/bin/python" -m pip install --quiet --disable-pip-version-check --upgrade pip
    # --no-compile: no .pyc for every module of every wheel up front (a third of the install time on 2 cores);
    # Python writes them for the modules the tests import
    "$venv/bin/python" -m pip install --quiet --disable-pip-version-check --no-compile -r "$reqs"
    "$venv/bin/python" -m pip install --quiet --disable-pip-version-check --no-compile --no-deps -r requirements-data.txt
    "$venv/bin/python" -m pip install --quiet --disable-pip-version-check --no-compile --no-deps -e .
    echo "$want" > "$stamp"
  else
    echo "==> $venv: dependencies up to date"
  fi
  # tf2_msgs only: interbotix_xs_msgs serves Trossen's driver map, which no matrix test uses
  bash tools/build_ros_msgs.sh "$venv" tools/tf2_msgs
  echo "==> $venv ready in $(( $(date +%s) - start )) s"
}

names=("$@")
[ ${#names[@]} -gt 0 ] || names=(py310 py312 kilted)
for name in "${names[@]}"; do setup_one "$name"; done
