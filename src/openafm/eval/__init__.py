"""Evaluation harnesses: perplexity on held-out text, task scores."""
