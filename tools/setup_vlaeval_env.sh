#!/usr/bin/env bash
# Idempotent: .venv-vlaeval, an environment apart from .venv holding allenai's vla-evaluation-harness
# (PyPI vla-eval) for test_protocol_vlaeval.py: its model-server base classes serve a test model to our
# vla-eval:// client, and its own Connection client drives `robofollow serve --protocol vla-eval`.
# vla-eval goes in with --no-deps: its protocol and model-server code need only what
# tools/vlaeval-requirements.txt lists (its CLI and benchmarks want imageio-ffmpeg, jsonargparse, ...).
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=.venv-vlaeval
PYTHON=${PYTHON:-python3}
VLA_EVAL=vla-eval==0.8.0
if [ ! -x "$VENV/bin/python" ]; then
  echo "==> creating $VENV (vla-eval, the peer's own protocol code, for the conformance tests)"
  "$PYTHON" -m venv "$VENV"
fi
stamp="$VENV/.vlaeval-deps"
want=$( (sha256sum tools/vlaeval-requirements.txt; echo "$VLA_EVAL") | sha256sum | cut -d' ' -f1)
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check -r tools/vlaeval-requirements.txt
  "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check --no-deps "$VLA_EVAL"
  "$VENV/bin/python" -c "import vla_eval.connection, vla_eval.model_servers.serve, vla_eval.specs"
  echo "$want" > "$stamp"
fi
