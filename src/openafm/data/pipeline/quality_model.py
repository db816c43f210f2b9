"""Stage 5: a model-based quality filter trained on the data itself — a hashed n-gram logistic regression.

Labels. Positives are windows of edited, published English prose from the curated sources
(``POSITIVE_SOURCES``: the King James Bible, the Debian Reference, WordNet glosses), as the build read them — or,
when it read none of them (a build of the user's own files), straight from their packages. Negatives are made from
those same windows by destroying what makes text *text* while keeping its vocabulary: (a) the words shuffled,
(b) the sentence order kept but the words of each line reversed. Because a negative has exactly the words
of a positive, unigram features carry no signal and the model must learn local word order (bigrams) —
fluency, the property that separates prose from keyword lists, scrambled templates, tables and navigation
debris. The labels are sound by construction: every positive is human-written running text, every negative
is provably not (it is a permutation of one).

Model. Word unigrams and bigrams plus trigrams of an abstract sequence (function words kept, other words
replaced by their shape: syntax that carries over to texts whose vocabulary the curated sources lack), hashed (CRC-32) into 2**18 buckets, binary, L2-normalised; logistic
regression trained by SGD (numpy, seeded). Training documents are split into windows of 12, 24, 48 or 80
words (so short texts are in distribution); scored documents into 80-word windows; 20% of the positive
documents (by a hash of their id) and the negatives made from them are held out, and the held-out accuracy
is in the stage report. A document is scored by the mean probability of its first 16 windows and dropped as
``low-quality-score`` below 0.5. Only English general-domain documents are scored (the model knows only
English); the others pass and are counted as ``not-scored``.
"""

from __future__ import annotations

import json
import random
import re
import zlib
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np

from openafm.data.document import Document
from openafm.data.jsonl import read_documents
from openafm.data.pipeline.executor import Executor
from openafm.data.pipeline.stage import Drop, Scope, Stage
from openafm.data.sources import get_source

POSITIVE_SOURCES = ("bible-kjv-text", "debian-reference-en", "wordnet-base")
N_BUCKETS = 1 << 18
WINDOW_WORDS = 80
MAX_WINDOWS = 16
TRAIN_WINDOW_SIZES = (12, 24, 48, 80)
PACKAGE_POSITIVES = 300     # documents per curated source when the build reads none of them (user files only)


def windows(text: str, size: int = WINDOW_WORDS) -> list[list[str]]:
    """Consecutive windows of ``size`` words; line breaks kept as a "\\n" token (a last short window is kept
    only when it is the only one)."""
    words = text.replace("\n", " \n ").split(" ")
    words = [w for w in words if w]
    out = [words[i:i + size] for i in range(0, len(words), size)]
    if len(out) > 1 and len(out[-1]) < size // 2:
        out.pop()
    return [w for w in out if w]


FUNCTION_WORDS = frozenset(["a", "an", "the", "and", "or", "but", "if", "then", "so", "as", "of", "in", "on", "at", "to", "for", "from", "by", "with", "about", "into", "over", "after", "before", "between", "through", "under", "than", "that", "this", "these", "those", "there", "here", "it", "its", "he", "she", "they", "we", "you", "i", "me", "him", "her", "them", "us", "my", "your", "his", "our", "their", "who", "whom", "which", "what", "when", "where", "why", "how", "not", "no", "is", "are", "was", "were", "be", "been", "being", "have", "has", "had", "do", "does", "did", "will", "would", "shall", "should", "can", "could", "may", "might", "must", "all", "any", "some", "each", "every", "one", "other", "such", "only", "own", "same", "very", "just", "also", "more", "most", "much", "many", "few", "both", "either", "neither", "nor", "too", "yet"])
_TOKEN = re.compile(r"\w+|[^\w\s]")


def abstract(words: list[str]) -> list[str]:
    """The window as a sequence of function words and word shapes ("Xx", "x", "X", "9", punctuation)."""
    out = []
    for tok in _TOKEN.findall(" ".join(words).lower() if False else " ".join(words)):
        low = tok.lower()
        if low in FUNCTION_WORDS:
            out.append(low)
        elif tok.isdigit():
            out.append("9")
        elif tok[0].isalpha():
            out.append("X" if tok.isupper() and len(tok) > 1 else "Xx" if tok[0].isupper() else "x")
        else:
            out.append(tok)
    return out


def features(words: list[str]) -> tuple[np.ndarray, float]:
    """(unique bucket indices, value) of a window's word unigrams and bigrams plus trigrams of its abstract
    sequence (function words kept, other words as shapes — syntax that carries across domains);
    value = 1/sqrt(n) (L2-normalised)."""
    lowered = [w.lower() for w in words]
    shape = abstract(words)
    grams = (lowered + [a + " " + b for a, b in zip(lowered, lowered[1:])]
             + ["~" + " ".join(shape[i:i + 3]) for i in range(len(shape) - 2)])
    idx = np.unique(np.fromiter((zlib.crc32(g.encode()) % N_BUCKETS for g in grams), dtype=np.int64))
    return idx, 1.0 / np.sqrt(max(len(idx), 1))


def corrupt(words: list[str], kind: str, rng: random.Random) -> list[str]:
    if kind == "shuffle":
        out = list(words)
        rng.shuffle(out)
        return out
    if kind == "reverse-lines":
        out, line = [], []
        for w in words + ["\n"]:
            if w == "\n":
                out += line[::-1] + ["\n"]
                line = []
            else:
                line.append(w)
        return out[:-1]
    raise ValueError(f"unknown corruption {kind!r}; known: shuffle, reverse-lines")


def is_heldout(doc_id: str) -> bool:
    return zlib.crc32(doc_id.encode()) % 5 == 0


class QualityModel:
    def __init__(self, w: np.ndarray | None = None, b: float = 0.0):
        self.w = np.zeros(N_BUCKETS) if w is None else w
        self.b = b

    def prob(self, words: list[str]) -> float:
        idx, val = features(words)
        return float(1.0 / (1.0 + np.exp(-(self.b + val * self.w[idx].sum()))))

    def score(self, text: str) -> float:
        ws = windows(text)[:MAX_WINDOWS]
        return float(np.mean([self.prob(w) for w in ws])) if ws else 0.0

    def fit(self, examples: list[tuple[list[str], int]], *, epochs: int = 6, lr: float = 0.5, l2: float = 1e-6,
            seed: int = 0) -> None:
        feats = [(features(words), y) for words, y in examples]
        order = list(range(len(feats)))
        rng = random.Random(seed)
        for _ in range(epochs):
            rng.shuffle(order)
            for i in order:
                (idx, val), y = feats[i]
                p = 1.0 / (1.0 + np.exp(-(self.b + val * self.w[idx].sum())))
                g = p - y
                self.w[idx] -= lr * (g * val + l2 * self.w[idx])
                self.b -= lr * g

    def accuracy(self, examples: list[tuple[list[str], int]]) -> float:
        return sum((self.prob(w) >= 0.5) == bool(y) for w, y in examples) / max(len(examples), 1)

    def save(self, path: Path) -> None:
        np.savez_compressed(path, w=self.w, b=np.array(self.b))

    @classmethod
    def load(cls, path: Path) -> QualityModel:
        data = np.load(path)
        return cls(data["w"], float(data["b"]))


def labelled_examples(docs: list[Document], seed: int = 0) -> list[tuple[list[str], int]]:
    """Windows of every positive document as label 1, plus one corrupted copy of each as label 0. Window
    lengths cycle through ``TRAIN_WINDOW_SIZES`` so short documents (a fortune, a gloss) are in distribution."""
    rng = random.Random(seed)
    out = []
    for j, doc in enumerate(docs):
        for i, words in enumerate(windows(doc.text, TRAIN_WINDOW_SIZES[j % len(TRAIN_WINDOW_SIZES)])):
            out.append((words, 1))
            out.append((corrupt(words, ("shuffle", "reverse-lines")[i % 2], rng), 0))
    return out


class QualityModelStage(Stage):
    name = "quality-model"
    scope = Scope.CORPUS

    def __init__(self, *, threshold: float = 0.5, seed: int = 0):
        self.threshold, self.seed = threshold, seed
        self.model: QualityModel | None = None

    def prepare(self, input_shards: list[Path], work_dir: Path, executor: Executor) -> dict[str, Any]:
        model_path, info_path = work_dir / "quality-model.npz", work_dir / "quality-model.json"
        if model_path.exists() and info_path.exists():
            self.model = QualityModel.load(model_path)
            return json.loads(info_path.read_text())
        positives = [d for p in input_shards for d in read_documents(p)
                     if d.source in POSITIVE_SOURCES and d.lang == "en"]
        positives_from = "input"
        if not positives:              # a build of the user's own files only: the curated sources from their packages
            positives = [d for name in POSITIVE_SOURCES for d in get_source(name).read(PACKAGE_POSITIVES)]
            positives_from = "packages"
        train = labelled_examples([d for d in positives if not is_heldout(d.id)], self.seed)
        heldout = labelled_examples([d for d in positives if is_heldout(d.id)], self.seed + 1)
        if len(train) < 20 or not heldout:
            raise ValueError(f"quality-model stage: {len(train)} training and {len(heldout)} held-out windows from "
                             f"the curated sources {POSITIVE_SOURCES}; build with at least one of them and enough "
                             f"documents (e.g. --sources bible-kjv-text ... --limit-per-source 50 or more)")
        self.model = QualityModel()
        self.model.fit(train, seed=self.seed)
        info = {"model": {"positive_sources": list(POSITIVE_SOURCES), "positives_from": positives_from, "train_windows": len(train),
                          "heldout_windows": len(heldout), "train_accuracy": round(self.model.accuracy(train), 4),
                          "heldout_accuracy": round(self.model.accuracy(heldout), 4), "threshold": self.threshold}}
        self.model.save(model_path)
        info_path.write_text(json.dumps(info, indent=2) + "\n")
        return info

    def process(self, doc: Document, counts: Counter) -> Document | Drop:
        if self.model is None:
            raise RuntimeError("QualityModelStage.process called before prepare (no trained model)")
        if doc.domain != "general" or doc.lang != "en":
            counts["not-scored"] += 1
            return doc
        score = self.model.score(doc.text)
        doc.meta["quality_score"] = round(score, 4)
        counts["scored"] += 1
        return doc if score >= self.threshold else Drop("low-quality-score")
