"""SFT on chat examples: labels on exactly the assistant turn's tokens (checked against a naive character-offset
reference), whole examples packed with their own segments and positions, exact resume, the too-long policy, the
held-out loss equal to a per-example reference, and a LoRA SFT run whose adapter reloads through fm."""

from __future__ import annotations

import pytest
import torch

import openafm.fm as fm
from openafm.checkpoint.adapter import read_adapter
from openafm.checkpoint.native import save_checkpoint
from openafm.data.batch import IGNORE_INDEX
from openafm.data.chat import ChatExample
from openafm.data.guided import GuidedDataset
from openafm.errors import ConfigError
from openafm.train.config import TrainConfig
from openafm.train.lora import save_lora_adapter
from openafm.train.sft import Order, SFTLoader, TooLong, build_sft_trainer, chat_tokens, heldout_loss
from tiny import make_tiny

END = "<|im_end|>"


@pytest.fixture(scope="module")
def examples():
    return GuidedDataset(seed=0, size=40)[:40]


def reference_labels(tokenizer, example: ChatExample, ids: list[int]) -> list[int]:
    """Naive: a token is the assistant's when the characters it decodes to lie inside the assistant's content and
    end-of-turn marker of the rendered conversation; label t is token t + 1 when that token is the assistant's."""
    user = ([{"role": "system", "content": example.system}] if example.system is not None else []) + \
        [{"role": "user", "content": example.prompt}]
    full = tokenizer.apply_chat_template([*user, {"role": "assistant", "content": example.response}],
                                         add_generation_prompt=False)
    begin = full.index(example.response, len(tokenizer.apply_chat_template(user, add_generation_prompt=True)))
    end = begin + len(example.response) + len(END)
    owned, offset = [], 0
    for t in ids:
        piece = tokenizer.decode([t])
        assert full[offset:offset + len(piece)] == piece      # the tokens spell the rendered conversation
        owned.append(begin <= offset and offset + len(piece) <= end)
        offset += len(piece)
    assert full[offset:] == "\n"                              # only the newline after the end-of-turn is left out
    return [ids[t + 1] if owned[t + 1] else IGNORE_INDEX for t in range(len(ids) - 1)] + [IGNORE_INDEX]


def test_labels_are_exactly_the_assistant_tokens(tokenizer, examples):
    loader = SFTLoader(examples, tokenizer, seq_len=1024, global_batch=4, too_long=TooLong.SKIP)
    batch, seen = loader.next_batch(), 0
    for row in range(4):
        segs = batch.segment_ids[row]
        for s in range(int(segs.max()) + 1):
            where = (segs == s).nonzero().flatten()
            ids, labels = batch.input_ids[row, where].tolist(), batch.labels[row, where].tolist()
            assert batch.positions[row, where].tolist() == list(range(len(where)))
            if all(label == IGNORE_INDEX for label in labels):
                assert s == int(segs.max()) and set(ids) == {tokenizer.pad_token_id}    # the row's padding
                continue
            example = examples[loader.example_index(seen)]
            seen += 1
            assert labels == reference_labels(tokenizer, example, ids)
            assert tokenizer.decode([x for x in labels if x != IGNORE_INDEX]) == example.response + END
    assert seen >= 4 and seen == loader.state_dict()["next"]


def test_a_system_turn_is_rendered_before_the_user_and_never_labelled(tokenizer):
    example = ChatExample("What is 2 + 2?", '{"answer": 4}', "t", system="Reply in JSON. Be brief.")
    piece = chat_tokens(tokenizer, example)
    head = tokenizer.decode(piece.ids[:piece.start])
    assert head == tokenizer.apply_chat_template([{"role": "system", "content": example.system},
                                                  {"role": "user", "content": example.prompt}],
                                                 add_generation_prompt=True)
    assert "Reply in JSON. Be brief." in head and "SmolLM" not in head     # the template's default is replaced
    loader = SFTLoader([example], tokenizer, seq_len=256, global_batch=1, order=Order.IN_ORDER)
    row = loader.next_batch()
    n = len(piece.ids)
    labels = row.labels[0, :n].tolist()
    assert labels == reference_labels(tokenizer, example, piece.ids)
    assert tokenizer.decode([x for x in labels if x != IGNORE_INDEX]) == example.response + END
    plain = chat_tokens(tokenizer, ChatExample(example.prompt, example.response, "t"))
    assert "SmolLM" in tokenizer.decode(plain.ids[:plain.start])           # no system: the template's default


def test_rows_pack_whole_examples_in_stream_order(tokenizer, examples):
    loader = SFTLoader(examples, tokenizer, seq_len=1024, global_batch=2)      # every guided example fits 1024
    row, k, skipped = loader.row(0)
    pieces = [chat_tokens(tokenizer, examples[loader.example_index(i)]).ids for i in range(k + 1)]
    used = sum(len(p) for p in pieces[:k])
    assert skipped == 0 and used <= 1024 < used + len(pieces[k])                # greedy: the next one did not fit
    assert row["input_ids"][:used].tolist() == [t for p in pieces[:k] for t in p]
    assert row["input_ids"][used:].tolist() == [tokenizer.pad_token_id] * (1024 - used)
    assert row["segment_ids"].tolist() == [s for s, p in enumerate(pieces[:k]) for _ in p] + [k] * (1024 - used)
    assert sorted(loader.example_index(i) for i in range(40)) == list(range(40))     # an epoch is a permutation
    assert [loader.example_index(i) for i in range(40)] != list(range(40))
    assert [loader.example_index(i) for i in range(40, 80)] != [loader.example_index(i) for i in range(40)]


def test_resume_gives_the_same_batches(tokenizer, examples):
    def batches(loader, n):
        it = iter(loader)
        return [next(it) for _ in range(n)]

    make = lambda: SFTLoader(examples, tokenizer, seq_len=512, global_batch=2, seed=3,
                             too_long=TooLong.SKIP)
    straight = batches(make(), 30)                 # 30 x 2 rows: past the end of the first epoch
    first = make()
    batches(first, 12)
    resumed = make()
    resumed.load_state_dict(first.state_dict())
    for a, b in zip(straight[12:], batches(resumed, 18), strict=True):
        for f in ("input_ids", "labels", "positions", "segment_ids"):
            assert torch.equal(getattr(a, f), getattr(b, f))
    assert resumed.skipped > 0                     # some guided examples are longer than 512 tokens
    other = SFTLoader(examples, tokenizer, seq_len=256, global_batch=2, seed=3, too_long=TooLong.SKIP)
    with pytest.raises(ConfigError, match="seq_len=512"):
        other.load_state_dict(first.state_dict())


def test_ranks_split_the_global_rows(tokenizer, examples):
    whole = SFTLoader(examples, tokenizer, seq_len=512, global_batch=4, too_long=TooLong.SKIP).next_batch()
    parts = [SFTLoader(examples, tokenizer, seq_len=512, global_batch=4, rank=r, world_size=2,
                       too_long=TooLong.SKIP).next_batch() for r in range(2)]
    assert torch.equal(torch.cat([p.input_ids for p in parts]), whole.input_ids)


def test_too_long_examples_raise_or_are_skipped(tokenizer):
    long = ChatExample("Tell me everything. " * 40, "{\"a\": 1}", "notes.jsonl:2")
    short = ChatExample("Hi", "{\"a\": 1}", "notes.jsonl:1")
    with pytest.raises(ValueError, match=r"notes.jsonl:2: \d+ tokens do not fit in seq_len=128"):
        SFTLoader([short, long], tokenizer, seq_len=128, global_batch=1, order=Order.IN_ORDER).next_batch()
    loader = SFTLoader([short, long], tokenizer, seq_len=128, global_batch=2, order=Order.IN_ORDER,
                       too_long=TooLong.SKIP)
    loader.next_batch()
    assert loader.skipped >= 1
    with pytest.raises(ValueError, match="no example fits in seq_len=128"):
        SFTLoader([long], tokenizer, seq_len=128, global_batch=1, too_long=TooLong.SKIP).next_batch()
    with pytest.raises(ValueError, match="contains an end-of-turn token"):
        chat_tokens(tokenizer, ChatExample("Hi", f"yes{END} and more", "x:1"))


def tiny_model(tokenizer):
    return make_tiny("smollm2-tiny", vocab_size=tokenizer.vocab_size, max_seq_len=1024)


def test_heldout_loss_is_the_per_example_mean(tokenizer, examples):
    model = tiny_model(tokenizer)
    some = examples[:6]
    got = heldout_loss(model, some, tokenizer, seq_len=1024, rows=2, too_long=TooLong.SKIP)
    total, count = 0.0, 0
    with torch.no_grad():
        for ex in some:
            piece = chat_tokens(tokenizer, ex)
            ids = torch.tensor([piece.ids])
            logits = model(ids)[0, piece.start - 1:-1]                           # predicts ids[start:]
            target = ids[0, piece.start:]
            total += float(torch.nn.functional.cross_entropy(logits, target, reduction="sum"))
            count += len(target)
    assert got["tokens"] == count and got["examples"] == 6
    assert got["loss"] == pytest.approx(total / count, rel=1e-4)


def test_lora_sft_trains_only_the_adapter_and_reloads_through_fm(tmp_path, tokenizer, examples):
    base = tiny_model(tokenizer)
    path = tmp_path / "base"
    save_checkpoint(path, base.config, base.state_dict(), tokenizer)
    config = TrainConfig.from_dict(dict(model=str(path), run_dir=str(tmp_path / "run"), steps=4, batch_size=2,
                                        seq_len=512, init="keep", peak_flops=1e10, progress=False,
                                        optimizer=dict(lr=1e-2, weight_decay=0.0), schedule=dict(kind="constant")))
    loader = SFTLoader(examples, tokenizer, seq_len=512, global_batch=2, too_long=TooLong.SKIP)
    trainer, fingerprint = build_sft_trainer(config, base=base, loader=loader, rank=4)
    frozen = {n: p.detach().clone() for n, p in trainer.model.named_parameters() if "lora_" not in n}
    before = heldout_loss(trainer.model, examples[30:36], tokenizer, seq_len=1024, too_long=TooLong.SKIP)["loss"]
    records = trainer.run()
    after = heldout_loss(trainer.model, examples[30:36], tokenizer, seq_len=1024, too_long=TooLong.SKIP)["loss"]
    assert len(records) == 4 and all(r["labelled_tokens"] > 0 for r in records) and after < before
    assert all(torch.equal(p, frozen[n]) for n, p in trainer.model.named_parameters() if n in frozen)
    out = save_lora_adapter(trainer, tmp_path / "a.safetensors", fingerprint)
    ids = torch.tensor([chat_tokens(tokenizer, examples[0]).ids[:64]])
    with torch.no_grad():
        expected = trainer.model.eval()(ids)
        adapted = fm.SystemLanguageModel(model=str(path), adapter=fm.SystemLanguageModel.Adapter(out))
        torch.testing.assert_close(adapted.language_model().model(ids), expected, rtol=1e-5, atol=1e-5)


def test_lora_sft_continues_an_adapter_from_its_tensors(tmp_path, tokenizer, examples):
    def trainer_for(run: str, steps: int, **lora):
        config = TrainConfig.from_dict(dict(model="tiny", run_dir=str(tmp_path / run), steps=steps, batch_size=2,
                                            seq_len=512, init="keep", peak_flops=1e10, progress=False,
                                            optimizer=dict(lr=1e-2, weight_decay=0.0),
                                            schedule=dict(kind="constant")))
        loader = SFTLoader(examples, tokenizer, seq_len=512, global_batch=2, too_long=TooLong.SKIP)
        torch.manual_seed(0)
        return build_sft_trainer(config, base=tiny_model(tokenizer), loader=loader, **lora)

    first, fingerprint = trainer_for("first", 3, rank=4)
    first.run()
    adapter = read_adapter(save_lora_adapter(first, tmp_path / "a.safetensors", fingerprint))
    ids = torch.tensor([chat_tokens(tokenizer, examples[0]).ids[:64]])
    with torch.no_grad():
        trained = first.model.eval()(ids)
    # continued: the adapter's own factors at step 0 (the model's output equals the first run's), then they move
    more, _ = trainer_for("more", 2, rank=adapter.rank, alpha=adapter.alpha, init_state=adapter.tensors)
    with torch.no_grad():
        torch.testing.assert_close(more.model.eval()(ids), trained, rtol=1e-5, atol=1e-5)
    start = {n: p.detach().clone() for n, p in more.model.named_parameters() if "lora_B" in n}
    more.run()
    assert any(not torch.equal(p, start[n]) for n, p in more.model.named_parameters() if n in start)
    # an adapter of another rank does not fit, and full SFT takes no adapter
    with pytest.raises(ValueError, match=r"has shape .* \(a different rank"):
        trainer_for("other", 1, rank=2, init_state=adapter.tensors)
    with pytest.raises(ConfigError, match="adapter to continue are LoRA options"):
        trainer_for("full", 1, method="full", init_state=adapter.tensors)
