"""Fixed multilingual text for tokenizer tests: TEXT to encode, CORPUS to train small tokenizers on.

TEXT covers what pre-tokenizers treat differently: scripts with and without spaces and case, mixed-case
words (camelCase, non-ASCII capitals), contractions in both cases, digit runs, code, emoji (some not in
CORPUS, so byte fallback is used), runs of spaces, tabs, CRLF and blank lines, trailing spaces.
"""

TEXT = (
    "Hello world! It's a test, isn't it? I'LL SEE YOU'RE RIGHT, we'd've gone.\n"
    "Grüße aus München: Die Straße ist 12345 Meter lang, ÜBERGRÖSSE und großartig.\n"
    "Привет, мир! Москва — столица России. ПриветМир и ЗаглавныеБуквы.\n"
    "你好，世界！今天天气很好。我们在学习自然语言处理。\n"
    "こんにちは、世界。東京は日本の首都です。カタカナとひらがな。\n"
    "مرحبا بالعالم! اللغة العربية جميلة ١٢٣.\n"
    "नमस्ते दुनिया! हिंदी भाषा सुंदर है। १२३४\n"
    "Emoji: 😀🎉👍🏽 and 🇩🇪 flags; café naïve résumé.\n"
    "def camelCase(xValue, HTTPServer):\n"
    "    return {'key': [1, 2, 3.14159]}  # comment\n"
    "\tif x >= 10 && y != 20: print(\"ok\")\r\n"
    "numbers 0 7 42 1000000 3.5e-10 2024-01-31\n"
    "\n\n\n"
    "multiple     spaces   here  and trailing   \n"
    "   leading spaces and the end."
)

CORPUS = [
    "The quick brown fox jumps over the lazy dog. It's what they're doing, isn't it? We'll see.",
    "Hello world, hello again. Testing the tokenizer with some English text and numbers 123 456 7890.",
    "Grüße aus Berlin und München. Die Straße ist lang und groß. Übergröße, Äpfel, Öl.",
    "Привет, как дела? Москва большой город. Мир и люди, столица страны, Россия.",
    "你好世界，今天天气很好。我们学习语言处理和自然科学。世界很大。",
    "こんにちは世界。東京は日本の首都です。ひらがなとカタカナを学びます。",
    "مرحبا بالعالم، اللغة العربية جميلة جدا. العالم كبير.",
    "नमस्ते दुनिया, हिंदी भाषा बहुत सुंदर है। दुनिया बड़ी है।",
    "def main(args):\n    return [x * 2 for x in args if x > 0]  # double\n",
    "class HTTPServer:\n\tdef serve(self, port=8080):\n\t\tprint('serving', port)\n",
    "Emoji 😀 are fun 🎉; café, naïve, résumé.",
    "numbers: 1 2 3 10 20 100 2024 3.14 1e-5 and    spaces\n\n  indented lines\n",
] * 3
