"""benchmarks/vision_answer_probe.py's decoder LoRA: on a tiny decoder and tower, the adapter's tensors are the only
decoder tensors that train (in the answer optimizer's second group, at the encoder's rate), and the question prefix's
K/V is recomputed through the adapted decoder before each loss, so training sees what inference computes."""

import random

import pytest
import torch

from bench_modules import load_benchmark
from openafm.checkpoint.load import load_model
from openafm.models.image_views import Resolution
from openafm.models.vision import vision_tiny
from openafm.models.vl_adapter import AdapterConfig
from openafm.models.vlm import VisionTower, VisionTowerConfig
from openafm.train.vision.mix import ResolutionMix
from openafm.train.vision.questions import FreshQuestions
from openafm.train.vision.tasks import Task
from openafm.train.vision.vlm import EncoderTraining, PrefixKV, VLMTrainConfig, VLMTrainer


def test_only_the_decoder_adapter_trains_and_the_prefix_follows_it(tiny_checkpoint):
    probe = load_benchmark("vision_answer_probe")
    lm = load_model(tiny_checkpoint)
    torch.manual_seed(0)
    tower = VisionTower(VisionTowerConfig(vision=vision_tiny(), adapter=AdapterConfig(
        in_dim=32, out_dim=lm.model.config.dim, hidden=16)))
    config = VLMTrainConfig(align_steps=0, steps=2, batch=2, lr=1e-2, encoder_lr=1e-2, encoder=EncoderTraining.FROZEN,
                            mix=ResolutionMix(low_rapid=1.0), task_weights=((Task.READ_DIGIT, 1.0),))
    trainer = VLMTrainer(lm.model, lm.tokenizer, tower, config)
    base = {n: p.detach().clone() for n, p in lm.model.named_parameters()}
    probe.adapt_decoder(trainer, rank=2)
    assert len(trainer.opt.param_groups) == 2
    lora = {n: p for n, p in lm.model.named_parameters() if "lora_" in n}
    assert lora and all(p.requires_grad for p in lora.values())
    assert {id(p) for p in trainer.opt.param_groups[1]["params"]} == {id(p) for p in lora.values()}
    before = {n: p.detach().clone() for n, p in lora.items()}
    trainer.train(FreshQuestions(absent=0.0))
    assert any(not torch.equal(p, before[n]) for n, p in lora.items() if n.endswith("lora_B"))
    for name, p in lm.model.named_parameters():
        if "lora_" not in name:
            torch.testing.assert_close(p, base[name.replace(".base.", ".")], msg=name)
    prefix = torch.tensor([trainer.rendered[Task.READ_DIGIT].prefix])
    trainer.prefix_kv[Task.READ_DIGIT] = None
    trainer.loss(FreshQuestions(absent=0.0).draw(Task.READ_DIGIT, 2, random.Random(0)), Resolution.RAPID)
    recomputed = trainer.prefix_kv[Task.READ_DIGIT]
    for layer, kv in PrefixKV.capture(lm.model, prefix).items():         # through the adapted decoder, as it is now
        torch.testing.assert_close(recomputed[layer].k, kv.k)
        torch.testing.assert_close(recomputed[layer].v, kv.v)


def test_a_trained_encoder_is_refused(tiny_checkpoint):
    probe = load_benchmark("vision_answer_probe")
    lm = load_model(tiny_checkpoint)
    tower = VisionTower(VisionTowerConfig(vision=vision_tiny(), adapter=AdapterConfig(
        in_dim=32, out_dim=lm.model.config.dim, hidden=16)))
    trainer = VLMTrainer(lm.model, lm.tokenizer, tower, VLMTrainConfig(task_weights=((Task.COUNT, 1.0),)))
    with pytest.raises(ValueError, match="freeze the encoder"):
        probe.adapt_decoder(trainer, rank=2)
