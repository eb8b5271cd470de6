#!/usr/bin/env bash
# Idempotent: .venv-lerobot, LeRobot's own environment (tools/lerobot-requirements.txt), apart from
# .venv, with the model-side package (model_server/, robofollow-model-server) installed editable.
# test_model_server_lerobot.py and tools/lerobot_end_to_end.sh serve LeRobot policies from it.
# Takes a few minutes and ~6 GB the first time (torch's CUDA build from PyPI, run on the CPU).
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=.venv-lerobot
PYTHON=${PYTHON:-python3}
if [ ! -x "$VENV/bin/python" ]; then
  echo "==> creating $VENV (LeRobot's own environment)"
  "$PYTHON" -m venv "$VENV"
fi
stamp="$VENV/.lerobot-deps"
want=$(cat tools/lerobot-requirements.txt model_server/pyproject.toml | sha256sum | cut -d' ' -f1)
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  echo "==> installing lerobot (tools/lerobot-requirements.txt) into $VENV"
  "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check -r tools/lerobot-requirements.txt
  "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check -e model_server
  "$VENV/bin/python" -c "import torchvision, lerobot.policies.factory, robofollow_model_server.lerobot"
  echo "$want" > "$stamp"
fi
