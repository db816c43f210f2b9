"""BPE merge learning over words that are already sequences of token ids (the core of vocabulary extension).

Each word is a list of token ids with a count (how often it occurs). Repeatedly the most frequent
adjacent pair (a, b) is merged into a new token a+b with the next id, in every word, until `n_new`
tokens exist or the best pair occurs fewer than `min_frequency` times. Ties go to the smallest (a, b).

A pair whose concatenated string is already a token (old or new) is never merged: then each new token
has exactly one merge, hence one decomposition into the starting ids, and the learned merges applied
after a tokenizer's own merges reproduce exactly the segmentation simulated here (an old merge can
never fire again on a merged string).

Counts are updated incrementally: merging (a, b) only touches the words that contain it (`where`), and a
heap with stale entries skipped on pop finds the next best pair.
"""

from __future__ import annotations

import heapq
from collections import defaultdict

from tqdm import tqdm


def learn_merges(words: list[list[int]], counts: list[int], strings: list[str], *, n_new: int,
                 min_frequency: int = 2, progress: bool = False) -> list[tuple[int, int]]:
    """-> merges [(a, b)]; merge k creates token id len(strings) + k with string strings[a] + strings[b].

    `strings[i]` is token i's string (ids 0..len-1 are the starting vocabulary). `words` is updated in
    place to the final segmentation; `strings` is extended with the new tokens."""
    if n_new < 0 or min_frequency < 1:
        raise ValueError(f"n_new {n_new} must be >= 0 and min_frequency {min_frequency} >= 1")
    if len(words) != len(counts):
        raise ValueError(f"{len(words)} words but {len(counts)} counts")
    known = set(strings)
    pair_count: dict[tuple[int, int], int] = defaultdict(int)
    where: dict[tuple[int, int], set[int]] = defaultdict(set)
    for wi, (word, count) in enumerate(zip(words, counts)):
        for pair in zip(word, word[1:]):
            pair_count[pair] += count
            where[pair].add(wi)
    heap = [(-c, pair) for pair, c in pair_count.items()]
    heapq.heapify(heap)
    merges: list[tuple[int, int]] = []
    bar = tqdm(total=n_new, desc="learning merges", unit="tok", disable=not progress)
    while len(merges) < n_new and heap:
        neg, pair = heapq.heappop(heap)
        count = pair_count.get(pair, 0)
        if count != -neg:
            continue                                   # stale entry; the current count has its own
        if count < min_frequency:
            break
        a, b = pair
        merged_string = strings[a] + strings[b]
        if merged_string in known:
            continue                                   # would give a token two merges; see the module doc
        new_id = len(strings)
        strings.append(merged_string)
        known.add(merged_string)
        merges.append(pair)
        bar.update(1)
        changed: set[tuple[int, int]] = set()
        for wi in where.pop(pair):
            word, wcount = words[wi], counts[wi]
            new_word = _merge(word, a, b, new_id)
            if len(new_word) == len(word):
                continue                               # the pair left this word in an earlier merge
            for p in zip(word, word[1:]):
                pair_count[p] -= wcount
                changed.add(p)
            for p in zip(new_word, new_word[1:]):
                pair_count[p] += wcount
                where[p].add(wi)
                changed.add(p)
            words[wi] = new_word
        for p in changed:
            c = pair_count[p]
            if c <= 0:
                del pair_count[p]
                where.pop(p, None)
            elif p != pair:
                heapq.heappush(heap, (-c, p))
        pair_count.pop(pair, None)
    bar.close()
    return merges


def _merge(word: list[int], a: int, b: int, new_id: int) -> list[int]:
    """Replace each non-overlapping (a, b), left to right, by new_id."""
    out, i, n = [], 0, len(word)
    while i < n:
        if i + 1 < n and word[i] == a and word[i + 1] == b:
            out.append(new_id)
            i += 2
        else:
            out.append(word[i])
            i += 1
    return out
