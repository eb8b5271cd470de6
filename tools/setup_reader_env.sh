#!/usr/bin/env bash
# Idempotent: .venv-reader, an environment apart from .venv in which test_lerobot_reader.py opens
# the datasets we write with pyarrow + pandas + PyAV only (test/lerobot_v3_reader.py).
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=.venv-reader
PYTHON=${PYTHON:-python3}
if [ ! -x "$VENV/bin/python" ]; then
  echo "==> creating $VENV (independent LeRobot v3.0 reader)"
  "$PYTHON" -m venv "$VENV"
fi
stamp="$VENV/.reader-deps"
want=$(sha256sum tools/reader-requirements.txt | cut -d' ' -f1)
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check -r tools/reader-requirements.txt
  echo "$want" > "$stamp"
fi
