#!/usr/bin/env bash
# Sets everything up and runs the main job: `rlmx ask` on the support-tickets example, then shows the
# gold answer beside rlmx's answer. Uses the model configured in $RLMX_MODEL (with its key), e.g.
#   RLMX_MODEL=openai:gpt-5-mini RLMX_SUB_MODEL=openai:gpt-5-nano OPENAI_API_KEY=sk-... scripts/demo.sh
# or a config file's model, or the default model of a provider whose key is set. With none of these it
# runs the embedded demo model SmolLM2-135M in-process (installed by setup.sh; no key, no server): a
# 135M model's answer to this question is not to be trusted, and the demo says so.
# Extra arguments go to `rlmx ask` (with --json, stdout is rlmx's JSON object plus a "gold" field).
# Exit code: 0 when rlmx answered (right or wrong: the model's answer is not the demo's verdict),
# otherwise rlmx's own code (1 run error, 2 bad usage or configuration). See examples/support_tickets/demo.py.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh >&2
exec .venv/bin/python -m examples.support_tickets.demo "$@"
