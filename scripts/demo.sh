#!/usr/bin/env bash
# Sets everything up and runs the main job: `rlmx ask` on the support-tickets example.
# Uses the model configured in $RLMX_MODEL (with its key, e.g. OPENAI_API_KEY), e.g.
#   RLMX_MODEL=openai:gpt-5-mini RLMX_SUB_MODEL=openai:gpt-5-nano OPENAI_API_KEY=sk-... scripts/demo.sh
# or a config file's model, or the default model of a provider whose key is set. With none of these it
# runs the embedded demo model SmolLM2-135M in-process (installed by setup.sh; no key, no server): rlmx
# says so once, and a 135M model's answer to this question is not to be trusted.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
mkdir -p examples/support_tickets/data
.venv/bin/python examples/support_tickets/generate.py --out examples/support_tickets/data/tickets.txt \
  --gold-out examples/support_tickets/data/gold.json
echo "gold answer: $(cat examples/support_tickets/data/gold.json)"
exec .venv/bin/rlmx ask "Among users 12345, 67890 and 11111, how many issues are about billing?" \
  --context examples/support_tickets/data/tickets.txt "$@"
