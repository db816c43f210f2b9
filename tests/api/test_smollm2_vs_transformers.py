"""The embedded SmolLM2-135M-Instruct through openafm against transformers loading the same GGUF."""

import pytest
import torch

import openafm
from openafm.errors import ContextWindowExceededError
from openafm.runtime.generate import FinishReason, generate_tokens

pytestmark = pytest.mark.real_model

PROMPTS = [
    "The history of the Roman Empire spans more than a thousand years, and historians divide it into",
    "def quicksort(xs):\n    if len(xs) <= 1:\n        return xs\n    pivot = xs[0]\n",
    "Les droits de l'homme sont universels. Article 1: Tous les êtres humains naissent libres",
]


@pytest.fixture(scope="module")
def lm():
    return openafm.load("smollm2-135m-instruct")


@pytest.fixture(scope="module")
def hf_model(gguf_path):
    from transformers import AutoModelForCausalLM
    return AutoModelForCausalLM.from_pretrained(str(gguf_path.parent), gguf_file=gguf_path.name,
                                                dtype=torch.float32).eval()


@pytest.mark.parametrize("prompt", PROMPTS + ["chat"])
def test_logits_match_transformers(lm, hf_model, prompt):
    if prompt == "chat":
        prompt = lm.chat_prompt("Give me three tips for learning to cook.", system="You are concise.")
    ids = torch.tensor([lm.encode(prompt)])
    with torch.inference_mode():
        ours, ref = lm.model(ids), hf_model(ids).logits
    assert ours.shape == ref.shape == (1, ids.shape[1], 49152)
    assert (ours - ref).abs().max().item() <= 1e-3


def test_greedy_generation_is_token_identical_for_64_tokens(lm, hf_model):
    ids = lm.encode(PROMPTS[1])
    ours = generate_tokens(lm.model, [ids], max_new_tokens=64)[0].token_ids
    with torch.inference_mode():
        ref = hf_model.generate(torch.tensor([ids]), max_new_tokens=64, min_new_tokens=64, do_sample=False)
    assert ours == ref[0, len(ids):].tolist()


def test_batched_prompts_equal_one_at_a_time(lm):
    batch = lm.generate(PROMPTS, max_tokens=12)
    alone = [lm.generate(p, max_tokens=12) for p in PROMPTS]
    assert batch == alone


def test_chat_answer_and_eos(lm):
    outs = lm.generate_detailed([lm.chat_prompt("What is the capital of France?")], max_tokens=40)
    assert "Paris" in outs[0].text
    assert outs[0].finish_reason == FinishReason.EOS          # <|im_end|> ends the turn


def test_streamed_deltas_add_up_and_stop_strings_cut(lm):
    deltas = []
    text = lm.generate(PROMPTS[0], max_tokens=24, on_token=lambda e: deltas.append(e.text))
    assert "".join(deltas) == text and len(deltas) >= 10
    stop = text[10:14]                                        # a string known to appear in the output
    deltas.clear()
    cut = lm.generate(PROMPTS[0], max_tokens=24, stop=[stop], on_token=lambda e: deltas.append(e.text))
    assert cut == text[:text.index(stop)] and "".join(deltas) == cut


def test_prompt_longer_than_context_window_names_both_lengths(lm):
    long_prompt = "word " * 9000
    with pytest.raises(ContextWindowExceededError, match=r"prompt of \d+ tokens .*context window of 8192"):
        lm.generate(long_prompt, max_tokens=8)


def test_bf16_model_agrees_with_fp32_on_the_next_token(lm):
    bf16 = openafm.load("smollm2-135m-instruct", dtype="bfloat16")
    ids = torch.tensor([lm.encode(PROMPTS[0])])
    with torch.inference_mode():
        a, b = lm.model(ids)[0, -1], bf16.model(ids)[0, -1].float()
    assert a.argmax() == b.argmax()
    assert (a.softmax(-1) - b.softmax(-1)).abs().max().item() < 0.02
