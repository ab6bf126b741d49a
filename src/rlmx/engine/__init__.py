"""The RLM loop: nodes, the ledger, events, history."""
