"""Sessions of one model decode on one shared engine: requests that respond at the same time share its batch, fresh
sessions with the same instructions prefill them once, and each answer is the one the session gives alone; each
weight form (`weights=`) is its own backing model."""

import asyncio

import pytest

import openafm.fm as fm
from openafm.fm.model import ENGINE_ROWS
from openafm.nn.block_linear import BlockLinear
from openafm.nn.packed_kernel import Activations

pytestmark = pytest.mark.real_model

QUESTIONS = ["Name a colour.", "What is 2 + 3?", "Name a fruit.", "What is the capital of Italy?"]
GREEDY = fm.GenerationOptions(temperature=0.0, maximum_response_tokens=24)


def test_concurrent_sessions_share_the_engine_batch_and_answer_as_alone():
    model = fm.SystemLanguageModel(max_concurrent_requests=len(QUESTIONS))
    engine = model.engine()
    assert engine is fm.SystemLanguageModel().engine()           # one engine per backing model
    assert engine.config.max_batch == ENGINE_ROWS

    async def ask(q):
        return await fm.LanguageModelSession(model=model).respond(q, options=GREEDY)

    async def alone():
        return [await ask(q) for q in QUESTIONS]

    async def together():
        return list(await asyncio.gather(*(ask(q) for q in QUESTIONS)))
    sequential = asyncio.run(alone())
    widest, step = [0], engine._step

    def watched():                                               # the rows of each decode step
        widest[0] = max(widest[0], engine.running)
        step()
    engine._step = watched
    try:
        concurrent = asyncio.run(together())
    finally:
        del engine._step
    assert concurrent == sequential
    assert widest[0] >= 2                                        # requests of different sessions in one step


def test_a_session_continues_its_cache_through_the_shared_engine():
    session = fm.LanguageModelSession(model=fm.SystemLanguageModel())
    asyncio.run(session.respond("Name a colour.", options=GREEDY))
    cached = session._conversation.cached
    asyncio.run(session.respond("And another one?", options=GREEDY))
    assert session._conversation.last_turn.cached_tokens == cached > 0      # only the new turn was prefilled


def test_fresh_sessions_with_the_same_instructions_prefill_them_once():
    model = fm.SystemLanguageModel(max_concurrent_requests=len(QUESTIONS))
    instructions = "You are a museum guide. Answer visitors in one short sentence, politely."
    prefixes = model.engine().prefixes

    async def ask(q):
        session = fm.LanguageModelSession(model=model, instructions=instructions)
        return await session.respond(q, options=GREEDY), session._conversation

    async def together():
        return list(await asyncio.gather(*(ask(q) for q in QUESTIONS)))
    prefixes.clear()
    shared = asyncio.run(together())
    unshared = []
    for q in QUESTIONS:                                          # each from nothing
        prefixes.clear()
        unshared.append(asyncio.run(ask(q))[0])
    assert [a for a, _ in shared] == unshared
    turns = [c.last_turn for _, c in shared]
    cached = sorted(t.cached_tokens for t in turns)             # the first prefilled all; the others its start
    instruction_tokens = len(model.language_model().tokenizer.encode(instructions))
    assert cached[0] == 0 and cached[1] > instruction_tokens              # the instructions and the template
    assert all(t.prefilled_tokens + t.cached_tokens + t.generated_tokens == len(c.tokens)
               for t, (_, c) in zip(turns, shared, strict=True))
    assert all(c.total_prefilled == t.prefilled_tokens for t, (_, c) in zip(turns, shared, strict=True))


def test_weights_name_their_own_backing_model_and_bad_ones_raise_naming_the_choices():
    exact, rounded = fm.SystemLanguageModel(), fm.SystemLanguageModel(weights="native-int8")
    assert exact.engine() is not rounded.engine()                # each weight form loads its own copy
    assert rounded.language_model() is fm.SystemLanguageModel(weights="native-int8").language_model()
    def activations(model):
        return {m.activations for m in model.language_model().model.modules() if isinstance(m, BlockLinear)}
    assert activations(exact) == {Activations.FLOAT32} and activations(rounded) == {Activations.INT8}
    answer = asyncio.run(fm.LanguageModelSession(model=rounded).respond("Name a colour.", options=GREEDY))
    assert answer.strip()
    with pytest.raises(ValueError, match="weights='int4' is not a weights choice; use one of .*'native-int8'"):
        fm.SystemLanguageModel(weights="int4")
