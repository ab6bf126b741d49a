"""Model access: the LM protocol, the OpenAI-compatible client, the provider registry."""
