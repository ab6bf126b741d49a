"""`rlm.core`: the RLM class (`rlm.core.rlm`) and its types (`rlm.core.types`)."""
