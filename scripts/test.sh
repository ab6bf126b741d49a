#!/usr/bin/env bash
# Sets everything up and runs the test suite. Under CI=true the slow suites (real-model end-to-end,
# large-scale) run too, and nothing that CI needs may be skipped.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
if [ "${CI:-}" = "true" ] || [ "${RLMX_FULL_TESTS:-}" = "1" ]; then
  .venv/bin/python -m pytest -q -m "" "$@"
else
  .venv/bin/python -m pytest -q -m "not e2e and not slow" "$@"
fi
