#!/usr/bin/env bash
# Idempotent: .venv-lerobot, LeRobot's own environment (lerobot 0.4.4 + CPU torch), apart from .venv,
# with the model-side package (model_server/, robofollow-model-server) installed editable into it.
# test_model_server_lerobot.py and tools/lerobot_end_to_end.sh serve LeRobot policies from here.
# Why --no-deps for lerobot: see tools/lerobot-requirements.txt.
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
  echo "==> installing lerobot 0.4.4 + CPU torch into $VENV"
  pip_install() { "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check "$@"; }
  # torch first, alone, so that it resolves to the local CPU build (as requirements.txt does).
  pip_install "$(grep -E '^torch==' tools/lerobot-requirements.txt)"
  pip_install "$(grep -E '^torchvision==' tools/lerobot-requirements.txt)"
  pip_install --no-deps "$(grep -E '^lerobot==' tools/lerobot-requirements.txt)"
  grep -vE '^(#|$|torch==|torchvision==|lerobot==)' tools/lerobot-requirements.txt > "$VENV/.lerobot-deps.txt"
  pip_install -r "$VENV/.lerobot-deps.txt"
  pip_install -e model_server
  "$VENV/bin/python" -c "import lerobot, torch, robofollow_model_server; print('lerobot', lerobot.__version__, 'torch', torch.__version__)"
  echo "$want" > "$stamp"
fi
