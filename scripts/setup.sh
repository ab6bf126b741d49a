#!/usr/bin/env bash
# Creates ./.venv (if missing) and installs rlmx with the extras named in $RLMX_EXTRAS (default: dev).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
.venv/bin/python -m pip install -q --upgrade pip >/dev/null 2>&1 || true
.venv/bin/python -m pip install -q -e ".[${RLMX_EXTRAS:-dev}]" 2>&1 | grep -v "^WARNING: Location" || true
.venv/bin/python -c "import rlmx" # fail loudly if the install did not work
