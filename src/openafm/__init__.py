"""openafm: an open implementation of the Apple Intelligence Foundation Language Models (2025) stack.

    import openafm
    lm = openafm.load("smollm2-135m-instruct")
    print(lm.chat("Name three colours.", max_tokens=32))
"""

from openafm.api import LanguageModel, available_models, load

__version__ = "0.1.0"
__all__ = ["LanguageModel", "available_models", "load", "__version__"]
