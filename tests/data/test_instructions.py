"""Instruction-following constraints: every checker on a response that follows it and one that does not, the loose
relaxations (markdown stripped, first / last line dropped) against IFEval's definition, and the seeded generator."""

from __future__ import annotations

import pytest

from openafm.data.instructions import (CONFLICTS, Constraint, Kind, Relation, check, follows_loose, follows_strict,
                                       instruction_prompts, loose_variants)

FRENCH = "Le chat dort sur la table de la cuisine pendant que les enfants jouent dans le jardin."
CASES = [   # (constraint, a response that follows it, one that does not)
    (Constraint(Kind.WORDS, n=5, relation=Relation.AT_LEAST), "one two three four five", "one two three four"),
    (Constraint(Kind.WORDS, n=3, relation=Relation.AT_MOST), "it's fine.", "one two three four"),   # it, s, fine
    (Constraint(Kind.SENTENCES, n=3, relation=Relation.EXACTLY), "A b. C d! E f?", "A b. C d. E f. G."),
    (Constraint(Kind.SENTENCES, n=2, relation=Relation.AT_MOST), "Pi is 3.14 today. Ok.", "A. B. C."),
    (Constraint(Kind.PARAGRAPHS, n=2, relation=Relation.EXACTLY), "First part.\n\n  \nSecond part.",
     "First part.\nSecond line, same paragraph."),
    (Constraint(Kind.KEYWORDS, words=("river", "Moon")), "The moon over the River.", "The rivers and the moon."),
    (Constraint(Kind.FORBIDDEN, words=("cat",)), "Concatenate the dogs.", "A Cat sat."),
    (Constraint(Kind.LOWERCASE), "all lower case, 123.", "Not lower."),
    (Constraint(Kind.JSON), '```json\n{"a": [1, 2]}\n```', '{"a": 1,}'),
    (Constraint(Kind.BULLETS, n=2), "Intro\n* one\n- two\n**bold** is not a bullet", "* one\n* two\n* three"),
    (Constraint(Kind.END_PHRASE, phrase="That is all."), 'Done here. that is all."  ', "That is all. Bye."),
    (Constraint(Kind.LANGUAGE, lang="fr"), FRENCH, "The cat sleeps on the kitchen table while the children play."),
    (Constraint(Kind.NO_COMMAS), "No commas here.", "One, two."),
    (Constraint(Kind.TITLE), "<<A Title>>\nText", "<<>> no title, <<broken\n>>"),
]


@pytest.mark.parametrize("constraint, good, bad", CASES, ids=[f"{c.kind.value}-{i}" for i, (c, _, _) in
                                                              enumerate(CASES)])
def test_checker_positive_and_negative(constraint, good, bad):
    assert follows_strict(constraint, good)
    assert not follows_strict(constraint, bad)


def test_every_kind_has_a_case():
    assert {c.kind for c, _, _ in CASES} == set(Kind)


def test_empty_response_follows_nothing():
    assert not follows_strict(Constraint(Kind.NO_COMMAS), "   ")
    assert not follows_loose(Constraint(Kind.FORBIDDEN, words=("x",)), "")


def test_loose_variants_are_ifeval_eight():
    # IFEval (instruction_following_eval/evaluation_lib.py) builds exactly these, in this order.
    r = "*Intro*\nbody *b*\nend"
    assert loose_variants(r) == [r, "body *b*\nend", "*Intro*\nbody *b*", "body *b*",
                                 "Intro\nbody b\nend", "body b\nend", "Intro\nbody b", "body b"]


@pytest.mark.parametrize("constraint, response", [
    (Constraint(Kind.JSON), 'Sure, here it is:\n{"a": 1}'),                              # first line dropped
    (Constraint(Kind.END_PHRASE, phrase="Peace out."), "Bye now. Peace out.\n(Note: 12 words)"),  # last line
    (Constraint(Kind.LOWERCASE), "Here you go:\nall lower\nHope it helps!"),              # both dropped
    (Constraint(Kind.KEYWORDS, words=("river",)), "the **river** runs"),                  # already strict
    (Constraint(Kind.BULLETS, n=2), "**Title**\n* a\n* b"),                               # a "**" line is no bullet
])
def test_loose_passes_where_relaxation_helps(constraint, response):
    assert follows_loose(constraint, response)


def test_loose_relaxation_changes_verdicts():
    json_c = Constraint(Kind.JSON)
    text = 'Sure, here it is:\n{"a": 1}'
    assert not follows_strict(json_c, text) and follows_loose(json_c, text)
    title = Constraint(Kind.TITLE)
    assert not follows_loose(title, "no title\nat all")
    v = check([json_c, Constraint(Kind.NO_COMMAS), title], text)
    assert v.strict == (False, False, False) and v.loose == (True, True, False)   # the comma was on the dropped line
    assert v.fraction_loose == pytest.approx(2 / 3) and not v.all_loose


def test_constraint_fields_are_checked():
    with pytest.raises(ValueError, match="needs 'n'"):
        Constraint(Kind.WORDS, relation=Relation.AT_LEAST)
    with pytest.raises(ValueError, match="takes no 'phrase'"):
        Constraint(Kind.LOWERCASE, phrase="x")
    with pytest.raises(ValueError):
        Constraint("no-such-kind")
    c = Constraint(Kind.SENTENCES, n=3, relation=Relation.AT_MOST)
    assert Constraint.from_dict(c.to_dict()) == c


def test_generator_is_seeded_and_compatible():
    a, b = instruction_prompts(200, seed=3), instruction_prompts(200, seed=3)
    assert a == b and a != instruction_prompts(200, seed=4)
    kinds_seen = set()
    for p in a:
        kinds = [c.kind for c in p.constraints]
        assert 1 <= len(kinds) <= 3 and len(set(kinds)) == len(kinds)
        assert not any(frozenset((x, y)) in CONFLICTS for x in kinds for y in kinds if x != y)
        assert p.prompt.startswith(p.task) and all(c.describe() in p.prompt for c in p.constraints)
        kinds_seen |= set(kinds)
    assert kinds_seen == set(Kind)
