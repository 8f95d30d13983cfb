"""Models: embedder, cross-encoder, LLM providers, device selection."""
