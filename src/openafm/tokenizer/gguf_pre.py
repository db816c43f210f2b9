"""`tokenizer.ggml.pre` -> how byte-level BPE text is split into words first, as llama.cpp does it.

llama.cpp (src/llama-vocab.cpp) maps each `tokenizer.ggml.pre` name to a list of split regexes
(`LLAMA_VOCAB_PRE_TYPE_*`), applied in turn: each regex cuts every piece further, text between matches
staying a piece of its own. Here each list becomes Hugging Face `Split(regex, 'isolated')` steps (the
same semantics) followed by the ByteLevel byte -> character mapping. The regexes are the ones the models'
own tokenizer.json files carry; llama.cpp keeps an ASCII-only rewrite of some of them for its regex
engine (e.g. `[sS]` for `(?i:s)`), and tests/tokenizer/test_gguf_pre.py checks the two agree on
multilingual text. Names that share llama.cpp's regex list share an entry, with the two flags llama.cpp
sets per name: `ignore_merges` (a word that is itself a vocabulary token is not split by merges) and
the default of `add_bos_token` when the file does not say.

Like llama.cpp, no Unicode normalization is applied: Qwen's own tokenizer.json NFC-normalizes first, so
text not already in NFC (e.g. 'e' + U+0301) can tokenize differently from transformers for 'qwen2'.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from tokenizers import Regex, pre_tokenizers

# GPT-2's regex is ByteLevel(use_regex=True)'s own; the others as the models' tokenizer.json write them.
LLAMA3 = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*"
          r"|\s*[\r\n]+|\s+(?!\S)|\s+")
QWEN2 = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"
         r"|\s*[\r\n]+|\s+(?!\S)|\s+")
_UPPER, _LOWER = r"[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]", r"[\p{Ll}\p{Lm}\p{Lo}\p{M}]"
TEKKEN = (rf"[^\r\n\p{{L}}\p{{N}}]?{_UPPER}*{_LOWER}+|[^\r\n\p{{L}}\p{{N}}]?{_UPPER}+{_LOWER}*|\p{{N}}"
          r"| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+")
_CONTRACTION = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)?"
GPT4O = (rf"[^\r\n\p{{L}}\p{{N}}]?{_UPPER}*{_LOWER}+{_CONTRACTION}"
         rf"|[^\r\n\p{{L}}\p{{N}}]?{_UPPER}+{_LOWER}*{_CONTRACTION}"
         r"|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+")
DEEPSEEK_V3 = (r"\p{N}{1,3}",
               "[\u4e00-\u9fa5\u3040-\u309f\u30a0-\u30ff]+",  # CJK ideographs, hiragana, katakana
               r"[!" + '"' + r"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+|[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+"
               r"| ?[\p{P}\p{S}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")


@dataclass(frozen=True)
class PreTokenizerSpec:
    """One llama.cpp regex list: how to build its pre-tokenizer, plus the per-name flags."""
    build: Callable[[bool], pre_tokenizers.PreTokenizer]  # add_prefix_space -> pre-tokenizer
    ignore_merges: bool = False
    add_bos: bool = False                                  # llama.cpp's add_bos_token default

    def __call__(self, add_prefix_space: bool) -> pre_tokenizers.PreTokenizer:
        return self.build(add_prefix_space)


def _gpt2(add_prefix_space: bool) -> pre_tokenizers.PreTokenizer:
    return pre_tokenizers.ByteLevel(add_prefix_space=add_prefix_space, use_regex=True)


def _digits_then_gpt2(add_prefix_space: bool) -> pre_tokenizers.PreTokenizer:
    # llama.cpp splits with "\p{N}" (each digit alone), then with the GPT-2 regex inside each piece; the
    # models' own tokenizer.json says the same as Digits(individual_digits) + ByteLevel(use_regex).
    return pre_tokenizers.Sequence([pre_tokenizers.Digits(individual_digits=True),
                                    pre_tokenizers.ByteLevel(add_prefix_space=add_prefix_space, use_regex=True)])


def _splits(*patterns: str) -> Callable[[bool], pre_tokenizers.PreTokenizer]:
    """Split by each regex in turn (matches and the text between them are pieces), then map to bytes."""
    def build(add_prefix_space: bool) -> pre_tokenizers.PreTokenizer:
        steps = [pre_tokenizers.Split(Regex(p), behavior="isolated", invert=False) for p in patterns]
        return pre_tokenizers.Sequence([*steps, pre_tokenizers.ByteLevel(add_prefix_space=add_prefix_space,
                                                                          use_regex=False)])
    return build


def _names(spec: PreTokenizerSpec, *names: str) -> dict[str, PreTokenizerSpec]:
    return dict.fromkeys(names, spec)


# tokenizer.ggml.pre -> spec. Grouped as llama.cpp groups the names (LLAMA_VOCAB_PRE_TYPE_* in comments).
PRE_TOKENIZERS: dict[str, PreTokenizerSpec] = {
    # GPT2 ('gpt2' is openafm's own older name for it; llama.cpp writes 'gpt-2')
    **_names(PreTokenizerSpec(_gpt2), "gpt2", "gpt-2", "phi-2", "mpt", "olmo", "jais", "exaone4", "roberta-bpe",
             "jina-v1-en", "jina-v2-code", "jina-es", "jina-de", "jina-v2-es", "jina-v2-de", "gigachat"),
    # STARCODER, SMOLLM, REFACT, COMMAND_R, CODESHELL, EXAONE, MINERVA
    **_names(PreTokenizerSpec(_digits_then_gpt2), "smollm", "starcoder", "refact", "command-r", "codeshell",
             "exaone", "minerva-7b"),
    # LLAMA3 (Llama 3.x, Falcon 3, Pixtral, LFM2)
    **_names(PreTokenizerSpec(_splits(LLAMA3), ignore_merges=True, add_bos=True), "llama-bpe", "llama3", "llama-v3",
             "falcon3", "falcon-h1", "pixtral", "midm-2.0", "lfm2"),
    # DBRX, SMAUG: Llama 3's regex without its flags (cl100k vocabularies, e.g. Phi-4)
    **_names(PreTokenizerSpec(_splits(LLAMA3)), "dbrx", "smaug-bpe"),
    # QWEN2, STABLELM2 (Qwen2, Qwen2.5, Qwen3, DeepSeek-R1 distills of Qwen)
    **_names(PreTokenizerSpec(_splits(QWEN2)), "qwen2", "deepseek-r1-qwen", "megrez", "stablelm2"),
    # TEKKEN (Mistral Nemo, Mistral Small 3, Ministral)
    "tekken": PreTokenizerSpec(_splits(TEKKEN), ignore_merges=True, add_bos=True),
    # GPT4O (o200k vocabularies, Llama 4)
    **_names(PreTokenizerSpec(_splits(GPT4O)), "gpt-4o", "llama4", "minimax-m2"),
    # DEEPSEEK3_LLM (DeepSeek V3 / R1)
    "deepseek-v3": PreTokenizerSpec(_splits(*DEEPSEEK_V3)),
}
