import math

import pytest
import torch

from openafm.data.images.emoji import EmojiStyle, emoji_images
from openafm.data.images.image_set import concat
from openafm.models.clip import ClipConfig, ClipModel, TextConfig
from openafm.models.vision import get_vision_preset
from openafm.train.vision.clip import (
    CaptionTokens,
    ClipTrainConfig,
    ClipTrainer,
    PairSampler,
    contrastive_loss,
    zero_shot,
)


def test_contrastive_loss_matches_the_closed_form():
    a = 0.3
    images = torch.tensor([[1.0, 0.0], [0.0, 1.0], [math.sqrt(0.5), math.sqrt(0.5)]], dtype=torch.float64)
    texts = torch.tensor([[math.cos(a), math.sin(a)], [0.0, 1.0], [-1.0, 0.0]], dtype=torch.float64)
    s = 10.0
    sim = [[s * sum(x * y for x, y in zip(i, t, strict=True)) for t in texts.tolist()] for i in images.tolist()]
    rows = [-sim[i][i] + math.log(sum(math.exp(v) for v in sim[i])) for i in range(3)]
    cols = [-sim[j][j] + math.log(sum(math.exp(sim[i][j]) for i in range(3))) for j in range(3)]
    want = (sum(rows) / 3 + sum(cols) / 3) / 2
    got = contrastive_loss(images, texts, torch.tensor(s, dtype=torch.float64))
    assert abs(float(got) - want) < 1e-12


def test_the_loss_is_symmetric_and_falls_with_a_sharper_temperature_on_aligned_pairs():
    x = torch.nn.functional.normalize(torch.randn(6, 4, dtype=torch.float64), dim=-1)
    y = torch.nn.functional.normalize(torch.randn(6, 4, dtype=torch.float64), dim=-1)
    s = torch.tensor(5.0, dtype=torch.float64)
    assert torch.allclose(contrastive_loss(x, y, s), contrastive_loss(y, x, s))
    assert contrastive_loss(x, x, torch.tensor(50.0)) < contrastive_loss(x, x, torch.tensor(5.0))


def test_param_count_and_config_round_trip():
    config = ClipConfig(vision=get_vision_preset("vision-tiny"), text=TextConfig(width=32, heads=2, depth=1),
                        embed_dim=16)
    assert ClipModel(config, device="meta").num_parameters() == config.param_count()
    assert ClipConfig.from_dict(config.to_dict()) == config


def test_text_tower_ignores_padding():
    torch.manual_seed(0)
    model = ClipModel(ClipConfig(vision=get_vision_preset("vision-tiny"), text=TextConfig(width=32, heads=2),
                                 embed_dim=16)).double().eval()
    ids = torch.tensor([[5, 9, 11]])
    padded = torch.tensor([[5, 9, 11, 0, 7]])
    valid = torch.tensor([[True, True, True, False, False]])
    torch.testing.assert_close(model.encode_text(ids, torch.ones(1, 3, dtype=torch.bool)),
                               model.encode_text(padded, valid), rtol=1e-12, atol=1e-12)


def test_caption_tokens_are_the_tokenizer_ids_padded(tokenizer):
    tokens = CaptionTokens(tokenizer, max_tokens=4)
    ids, valid = tokens.batch(["grinning face", "a very long caption with many words"])
    first = tokenizer.encode("grinning face")
    assert ids[0, : len(first)].tolist() == first and valid[0].sum() == len(first)
    assert ids.shape == (2, 4) and valid[1].all()


def test_sampler_batches_hold_distinct_classes_and_cover_them_all():
    images = concat([emoji_images(EmojiStyle.APPLE, limit=10), emoji_images(EmojiStyle.GOOGLE, limit=10)])
    sampler = PairSampler(images, english_share=1.0, seed=0)
    seen = set()
    for _ in range(5):
        index, texts = sampler.sample(4)
        keys = [images.keys[i] for i in index]
        assert len(set(keys)) == 4 and texts == [images.names[i] for i in index]
        seen |= set(keys)
    assert len(seen) == 10
    with pytest.raises(Exception, match="batch_size=11 exceeds the 10 distinct classes"):
        sampler.sample(11)


def test_a_short_run_learns_the_training_pairs(tokenizer):
    images = concat([emoji_images(s, limit=8, size=56, only=["Food & Drink"])
                     for s in (EmojiStyle.APPLE, EmojiStyle.GOOGLE)])
    torch.manual_seed(0)
    model = ClipModel(ClipConfig(vision=get_vision_preset("vision-tiny"), text=TextConfig(width=32, heads=2, depth=1),
                                 embed_dim=32))
    config = ClipTrainConfig(steps=80, batch_size=8, image_size=56, mask_ratio=0.5, lr=2e-3, warmup_steps=5,
                             english_share=1.0)
    trainer = ClipTrainer(model, images, tokenizer, config)
    while not trainer.done:
        trainer.step()
    losses = [r.loss for r in trainer.records]
    assert sum(losses[:5]) / 5 > 2.0 and sum(losses[-5:]) / 5 < 0.6            # log 8 = 2.08: chance
    result = zero_shot(model, images, tokenizer, 56)
    assert result.classes == 8 and result.images == 16 and result.top1 > 0.8    # chance: 1/8
