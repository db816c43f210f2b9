"""openafm: an open implementation of the Apple Intelligence Foundation Language Models (2025) stack."""

__version__ = "0.1.0"
