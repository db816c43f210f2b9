"""The tokenizer built from the packaged GGUF, against transformers' tokenizer for the same file and
against llama.cpp's definition of the 'smollm' pre-tokenizer; chat template, save/load, streaming."""

from __future__ import annotations

import json

import pytest
import regex

from openafm.tokenizer import ChatTemplateError, StreamDecoder, Tokenizer, TokenizerError

pytestmark = pytest.mark.real_model

TEXTS = [
    "The Apple Foundation Models were trained on a large corpus of licensed and public data.",
    "It's a truth universally acknowledged, that a single man in possession of a good fortune, "
    "must be in want of a wife. They'll say we've done it; I'd agree.",
    'def fib(n: int) -> int:\n    """Return the n-th Fibonacci number."""\n    if n < 2:\n        return n\n'
    "    return fib(n - 1) + fib(n - 2)\n\n\nprint([fib(i) for i in range(10)])\n",
    "class Foo:\n\tdef __init__(self):\n\t\tself.x = {'a': 1, \"b\": [2, 3]}  # comment\r\n",
    "12345 + 678 = 13023, pi ≈ 3.14159265, in 2024 the price was $1,299.99 (up 12%).",
    "Numbers: 0 00 007 1e-9 0x1F 1_000_000 -42 +7 #3 v2.0.1",
    "Emoji: 😀😃🦙🇫🇷👩‍👩‍👧 and symbols ™ © ∑ ∞ ≠ → ←",
    "中文：今天天气很好，我们去公园散步吧。日本語：こんにちは、世界！한국어: 안녕하세요 세계",
    "Ελληνικά, русский текст, العربية, עברית, हिन्दी, ไทย",
    "Accents: café, naïve, Zürich, São Paulo, Ångström, façade, jalapeño",
    "whitespace   runs\t\ttabs\n\n\nnewlines   \n  trailing spaces   ",
    "   leading spaces",
    "<|im_start|>system\nYou are helpful.<|im_end|>\n<|im_start|>user\nHi there!<|im_end|>\n<|im_start|>assistant\n",
    "text with <|im_start|> in the middle and <|endoftext|> at the end<|endoftext|>",
    "<|im_start|><|im_end|><filename>main.py<file_sep><gh_stars>100",
    "URLs: https://example.com/path?query=1&x=y#frag and emails: someone@example.org",
    "",
    "a",
    " ",
    "\n",
]

# Whitespace before a number: llama.cpp's 'smollm' pre-tokenizer (like the model's own tokenizer.json)
# first cuts off each numeric character, so "a  1" is "a", "ĠĠ", "1" and " ½" is "Ġ", "Â½".
# transformers 5.23 has no 'smollm' entry for GGUF files and uses the plain GPT-2 regex, which keeps
# " 1" and " ½" whole: "a", "Ġ", "Ġ", "1" and "ĠÂ", "½". So these are compared only with the llama.cpp
# reference below. (With one space before an ASCII digit both agree: the vocabulary has no "Ġ1".)
SPACES_BEFORE_DIGITS = ["a  1", "total:    42", "x =\n  3", "col1   col2   3.5", "fractions ½ ² ٣ ४ ⅷ"]

# llama.cpp (llama-vocab.cpp) regexes for tokenizer.ggml.pre = 'smollm', applied one after the other.
LLAMA_CPP_SMOLLM = [r"\p{N}", r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)"]


def llama_cpp_split(text: str, specials: list[str]) -> list[str]:
    """Text -> pieces as llama.cpp cuts it: special tokens first, then each regex within each piece
    (matches and the text between them both become pieces)."""
    pieces = [p for p in regex.split("(" + "|".join(map(regex.escape, specials)) + ")", text) if p]
    for pattern in LLAMA_CPP_SMOLLM:
        split = []
        for piece in pieces:
            if piece in specials:
                split.append(piece)
                continue
            end = 0
            for match in regex.finditer(pattern, piece):
                split += [p for p in (piece[end:match.start()], match.group()) if p]
                end = match.end()
            split += [piece[end:]] if piece[end:] else []
        pieces = split
    return pieces


def llama_cpp_reference_ids(text: str, hf_tokenizer, specials: list[str]) -> list[int]:
    """llama.cpp's pieces, each run through transformers' BPE on its own (for a single GPT-2 regex
    piece, its own pre-tokenizer leaves the piece whole)."""
    ids = []
    for piece in llama_cpp_split(text, specials):
        ids += hf_tokenizer.encode(piece, add_special_tokens=False)
    return ids


@pytest.fixture(scope="module")
def specials(gguf_file) -> list[str]:
    m = gguf_file.metadata
    return [t for t, kind in zip(m["tokenizer.ggml.tokens"], m["tokenizer.ggml.token_type"], strict=True) if kind == 3]


# -- encode / decode ---------------------------------------------------------------------------------------

def test_ids_match_transformers(tokenizer, hf_tokenizer):
    for text in TEXTS:
        assert tokenizer.encode(text) == hf_tokenizer.encode(text, add_special_tokens=False), text


def test_ids_match_llama_cpp_smollm_pre_tokenizer(tokenizer, hf_tokenizer, specials):
    for text in TEXTS + SPACES_BEFORE_DIGITS:
        assert tokenizer.encode(text) == llama_cpp_reference_ids(text, hf_tokenizer, specials), text


def test_digits_are_split_before_the_gpt2_regex(tokenizer):
    assert [tokenizer.id_to_token(i) for i in tokenizer.encode("a  12")] == ["a", "ĠĠ", "1", "2"]
    assert [tokenizer.id_to_token(i) for i in tokenizer.encode("12345")] == ["1", "2", "3", "4", "5"]


def test_encode_batch_matches_encode(tokenizer):
    assert tokenizer.encode_batch(TEXTS) == [tokenizer.encode(t) for t in TEXTS]


def test_decode_round_trips(tokenizer, hf_tokenizer):
    for text in TEXTS + SPACES_BEFORE_DIGITS:
        ids = tokenizer.encode(text)
        assert tokenizer.decode(ids) == text
        assert tokenizer.decode(ids) == hf_tokenizer.decode(ids)


def test_special_tokens_in_text_are_single_ids(tokenizer):
    assert tokenizer.encode("<|im_start|>") == [1]
    ids = tokenizer.encode("<|im_start|>user\nHi<|im_end|>")
    assert ids[0] == 1 and ids[-1] == 2 and 1 not in ids[1:-1] and 2 not in ids[1:-1]
    assert tokenizer.decode(ids, skip_special_tokens=True) == "user\nHi"


def test_vocabulary_and_special_ids(tokenizer, gguf_file):
    m = gguf_file.metadata
    assert tokenizer.vocab_size == len(m["tokenizer.ggml.tokens"]) == 49152
    assert (tokenizer.bos_token_id, tokenizer.eos_token_id, tokenizer.pad_token_id) == (1, 2, 2)
    assert tokenizer.bos_token == "<|im_start|>" and tokenizer.eos_token == "<|im_end|>"
    assert tokenizer.unk_token == "<|endoftext|>"
    assert tokenizer.eos_token_ids == {2}  # EOS is <|im_end|>, the token that ends a turn
    assert tokenizer.special_token_ids == set(range(17))
    for token_id in (0, 17, 1000, 49151):
        assert tokenizer.token_to_id(tokenizer.id_to_token(token_id)) == token_id
        assert tokenizer.id_to_token(token_id) == m["tokenizer.ggml.tokens"][token_id]
    assert tokenizer.encode("hi", add_special_tokens=True) == tokenizer.encode("hi")  # add_bos_token is false


def test_unknown_tokens_and_ids_raise(tokenizer):
    with pytest.raises(TokenizerError, match="token '<nope>' is not in the vocabulary"):
        tokenizer.token_to_id("<nope>")
    with pytest.raises(TokenizerError, match="token id 49152 is outside the vocabulary of 49152"):
        tokenizer.id_to_token(49152)
    with pytest.raises(TokenizerError, match="token id -1 is outside"):
        tokenizer.decode([5, -1])


@pytest.mark.parametrize("key, value, message", [
    ("tokenizer.ggml.model", "bert", r"tokenizer.ggml.model 'bert' is not supported \(supported: gpt2, llama\)"),
    ("tokenizer.ggml.pre", "default", r"tokenizer.ggml.pre 'default' is not supported \(supported: .*llama-bpe.*qwen2"),
    ("tokenizer.ggml.pre", None, "tokenizer.ggml.pre None is not supported"),
])
def test_unsupported_gguf_tokenizers_are_named(gguf_file, key, value, message):
    with pytest.raises(TokenizerError, match=message):
        Tokenizer.from_gguf_metadata(gguf_file.metadata | {key: value})


# -- chat template ------------------------------------------------------------------------------------------

CONVERSATION = [
    {"role": "system", "content": "You are a concise assistant."},
    {"role": "user", "content": "What is the capital of France?"},
    {"role": "assistant", "content": "Paris."},
    {"role": "user", "content": "And of Japan? Answer in 日本語 🙂"},
]


@pytest.mark.parametrize("messages", [CONVERSATION, CONVERSATION[1:]], ids=["with-system", "default-system"])
@pytest.mark.parametrize("add_generation_prompt", [True, False])
def test_chat_template_matches_transformers(tokenizer, hf_tokenizer, messages, add_generation_prompt):
    ours = tokenizer.apply_chat_template(messages, add_generation_prompt=add_generation_prompt)
    theirs = hf_tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=add_generation_prompt)
    assert ours == theirs
    assert ours.endswith("<|im_start|>assistant\n") == add_generation_prompt


def test_chat_template_raise_exception_and_variables(tokenizer):
    template = ("{% if messages[0]['role'] != 'user' %}{{ raise_exception('first message must be from the user') }}"
                "{% endif %}{{ bos_token }}{{ messages | tojson }}{{ eos_token }}")
    custom = Tokenizer(tokenizer.backend, bos_token="<|im_start|>", eos_token="<|im_end|>", chat_template=template)
    with pytest.raises(ChatTemplateError, match="first message must be from the user"):
        custom.apply_chat_template([{"role": "system", "content": "x"}])
    rendered = custom.apply_chat_template([{"role": "user", "content": "<é>"}])
    assert rendered == '<|im_start|>[{"role": "user", "content": "<é>"}]<|im_end|>'  # tojson: no HTML escaping


def test_missing_chat_template_is_named(tokenizer):
    bare = Tokenizer(tokenizer.backend, eos_token="<|im_end|>")
    with pytest.raises(ChatTemplateError, match="has no chat template"):
        bare.apply_chat_template(CONVERSATION)
    assert bare.eos_token_ids == {2}


# -- files ----------------------------------------------------------------------------------------------------

def test_save_and_from_files_round_trip(tokenizer, tmp_path):
    tokenizer.save(tmp_path)
    loaded = Tokenizer.from_files(tmp_path)
    assert loaded.encode_batch(TEXTS + SPACES_BEFORE_DIGITS) == tokenizer.encode_batch(TEXTS + SPACES_BEFORE_DIGITS)
    assert loaded.chat_template == tokenizer.chat_template
    assert (loaded.bos_token_id, loaded.eos_token_id, loaded.pad_token_id, loaded.vocab_size) == (1, 2, 2, 49152)
    assert loaded.eos_token_ids == tokenizer.eos_token_ids
    assert loaded.special_token_ids == tokenizer.special_token_ids
    assert loaded.apply_chat_template(CONVERSATION) == tokenizer.apply_chat_template(CONVERSATION)


def test_saved_files_load_in_transformers(tokenizer, tmp_path):
    from transformers import AutoTokenizer

    tokenizer.save(tmp_path)
    theirs = AutoTokenizer.from_pretrained(str(tmp_path))
    for text in TEXTS + SPACES_BEFORE_DIGITS:
        assert theirs.encode(text, add_special_tokens=False) == tokenizer.encode(text), text
    assert theirs.apply_chat_template(CONVERSATION, tokenize=False, add_generation_prompt=True) == \
        tokenizer.apply_chat_template(CONVERSATION)
    assert (theirs.bos_token, theirs.eos_token) == ("<|im_start|>", "<|im_end|>")


def test_from_files_reads_hf_config_variants(tokenizer, tmp_path):
    """Special tokens written as {"content": ...}, the template in chat_template.jinja, and extra EOS ids
    from generation_config.json."""
    tokenizer.backend.save(str(tmp_path / "tokenizer.json"))
    (tmp_path / "tokenizer_config.json").write_text(json.dumps(
        {"bos_token": {"content": "<|im_start|>", "special": True}, "eos_token": "<|endoftext|>"}))
    (tmp_path / "chat_template.jinja").write_text("{% for m in messages %}{{ m['content'] }}<|im_end|>{% endfor %}")
    (tmp_path / "generation_config.json").write_text(json.dumps({"eos_token_id": [0, 5]}))
    loaded = Tokenizer.from_files(tmp_path)
    assert (loaded.bos_token_id, loaded.eos_token_id) == (1, 0)
    assert loaded.eos_token_ids == {0, 2, 5}  # EOS, <|im_end|> (the template ends turns with it), generation_config
    assert loaded.apply_chat_template([{"role": "user", "content": "hi"}]) == "hi<|im_end|>"


def test_from_files_without_tokenizer_json_is_named(tmp_path):
    with pytest.raises(TokenizerError, match="no tokenizer.json"):
        Tokenizer.from_files(tmp_path)


# -- streaming ------------------------------------------------------------------------------------------------

STREAM_TEXTS = [
    "Emoji: 😀😃🦙🇫🇷👩‍👩‍👧 done",
    "中文：今天天气很好，我们去公园散步吧。日本語：こんにちは、世界！",
    "<|im_start|>assistant\nLlamas 🦙 live in the Andes (安第斯山脈).<|im_end|>",
    TEXTS[2],
]


@pytest.mark.parametrize("text", STREAM_TEXTS, ids=["emoji", "cjk", "chat", "code"])
def test_stream_deltas_concatenate_to_decode(tokenizer, text):
    ids = tokenizer.encode(text)
    stream = StreamDecoder(tokenizer)
    deltas = [stream.push(i) for i in ids]
    deltas.append(stream.flush())
    assert "".join(deltas) == tokenizer.decode(ids) == text
    assert not any("\ufffd" in d for d in deltas)


def test_stream_holds_back_split_characters(tokenizer):
    ids = tokenizer.encode("🦙")
    assert len(ids) > 1  # the llama emoji's 4 bytes span several tokens
    stream = StreamDecoder(tokenizer)
    assert [stream.push(i) for i in ids] == [""] * (len(ids) - 1) + ["🦙"]
    stream.push(ids[0])
    assert stream.flush() == tokenizer.decode(ids[:1])  # an incomplete tail only shows at the end


def test_stream_skips_special_tokens_when_asked(tokenizer):
    ids = tokenizer.encode("<|im_start|>assistant\nOK<|im_end|>")
    stream = StreamDecoder(tokenizer, skip_special_tokens=True)
    text = "".join(stream.push(i) for i in ids) + stream.flush()
    assert text == "assistant\nOK"
