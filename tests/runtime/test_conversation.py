import pytest

from openafm.runtime.cancel import CancelToken, GenerationCancelled
from openafm.runtime.conversation import Conversation
from openafm.runtime.generate import generate_tokens

pytestmark = pytest.mark.real_model


@pytest.fixture(scope="module")
def lm():
    import openafm
    return openafm.load("smollm2-135m-instruct")


def test_second_turn_prefills_only_new_tokens_and_matches_a_fresh_run(lm):
    conv = Conversation(lm.model, lm.tokenizer)
    conv.append_text(lm.chat_prompt("Name a colour."))
    first = conv.generate(max_new_tokens=8)
    turn1_tokens = len(conv.tokens)
    conv.append_text("<|im_end|>\n<|im_start|>user\nAnd a fruit?<|im_end|>\n<|im_start|>assistant\n")
    second = conv.generate(max_new_tokens=8)
    assert conv.last_turn.cached_tokens == turn1_tokens - 1            # all but the last generated token
    assert conv.last_turn.prefilled_tokens == len(conv.tokens) - len(second.token_ids) - conv.last_turn.cached_tokens
    assert conv.last_turn.prefilled_tokens < 20
    prompt = conv.tokens[:len(conv.tokens) - len(second.token_ids)]
    fresh = generate_tokens(lm.model, [prompt], max_new_tokens=8, eos_token_ids=set(lm.tokenizer.eos_token_ids))[0]
    assert fresh.token_ids == second.token_ids
    assert conv.text == lm.tokenizer.decode(conv.tokens)
    del first


def test_a_failed_turn_drops_the_cache_and_the_next_turn_rebuilds_it(lm):
    conv = Conversation(lm.model, lm.tokenizer)
    conv.append_text(lm.chat_prompt("Hi"))
    conv.generate(max_new_tokens=4)

    def boom(event):
        raise RuntimeError("callback failed")
    conv.append_text(" more")
    with pytest.raises(RuntimeError, match="callback failed"):
        conv.generate(max_new_tokens=4, on_token=boom)
    assert conv.cache is None
    out = conv.generate(max_new_tokens=4)
    assert conv.last_turn.cached_tokens == 0                           # rebuilt from the token history
    assert conv.last_turn.prefilled_tokens == len(conv.tokens) - len(out.token_ids)
    # the cache holds every token but (unless EOS ended the turn) the last generated one
    assert len(conv.tokens) - conv.cache.steps in (0, 1)


def test_a_cancelled_turn_keeps_the_cache_and_the_next_turn_prefills_only_its_own_tokens(lm):
    conv = Conversation(lm.model, lm.tokenizer)
    conv.append_text(lm.chat_prompt("Name a colour."))
    conv.generate(max_new_tokens=8)
    mark, cached_before = conv.mark(), conv.cached
    conv.append_text("<|im_end|>\n<|im_start|>user\nWrite a long story.<|im_end|>\n<|im_start|>assistant\n")
    with_prompt = conv.mark()
    token, seen = CancelToken(), []

    def on_token(event):
        seen.append(event.token_id)
        if len(seen) == 3:
            token.cancel()
    with pytest.raises(GenerationCancelled, match="before decode step 3"):
        conv.generate(max_new_tokens=50, on_token=on_token, cancel=token)
    assert conv.mark() == with_prompt and conv.cache.steps == with_prompt[0]   # rewound to the conversation
    conv.rollback(mark)                                                         # forget the cancelled request
    assert conv.text == lm.tokenizer.decode(conv.tokens) and conv.cache.steps == mark[0] >= cached_before
    conv.append_text("<|im_end|>\n<|im_start|>user\nAnd a fruit?<|im_end|>\n<|im_start|>assistant\n")
    new_tokens = len(conv.tokens) - mark[0]
    second = conv.generate(max_new_tokens=8)
    assert conv.last_turn.cached_tokens == mark[0] and conv.last_turn.prefilled_tokens == new_tokens
    prompt = conv.tokens[:len(conv.tokens) - len(second.token_ids)]
    fresh = generate_tokens(lm.model, [prompt], max_new_tokens=8, eos_token_ids=set(lm.tokenizer.eos_token_ids))[0]
    assert fresh.token_ids == second.token_ids
