#!/usr/bin/env bash
# What only the tests need, beside .venv (tools/setup_env.sh): `make test` runs it, `make demo` does not.
# Each step is idempotent and quick on a second run.
set -euo pipefail
cd "$(dirname "$0")/.."

# Debian's chromium for test_lichtblick_layout (skipped without it); playwright (requirements.txt) drives it.
if ! command -v chromium >/dev/null && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
  echo "==> installing Debian's chromium (test_lichtblick_layout)"
  { apt-get update -qq && apt-get install -y -qq chromium >/dev/null; } || echo "==> chromium not installed: test_lichtblick_layout will skip"
fi
bash tools/setup_reader_env.sh
bash tools/setup_vlaeval_env.sh
bash tools/setup_olddeps_env.sh
