"""One module per multi-agent framework, the common Adapter contract, and the LLM gateway."""
