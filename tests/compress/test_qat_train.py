"""QAT on the trainer: loss falls and f moves, EMA weights are used for eval, weight decay 0 on QAT params,
resume after a stop repeats the metrics, the exported files equal the fake-quantized forward."""

from __future__ import annotations

import json

import pytest
import torch
from compress._qat_helpers import qat_config, small_logit_model

import openafm
from openafm.compress.levels import Levels
from openafm.compress.qat import QATSpec, qat_parametrizations
from openafm.compress.qat_train import baked_state_dict, build_qat_trainer, save_qat_outputs
from openafm.compress.quantized_io import load_quantized
from openafm.errors import ConfigError
from openafm.train.loop import METRICS_FILE
from openafm.train.synthetic import SyntheticLoader


def trainer_for(tmp_path, name="run", ema_decay=0.9, spec=None, **changes):
    return build_qat_trainer(qat_config(tmp_path / name, **changes), spec=spec or QATSpec(bits=2),
                             ema_decay=ema_decay, model=small_logit_model())


def f_values(model) -> torch.Tensor:
    return torch.cat([fq.f.detach().flatten() for _, _, _, fq in qat_parametrizations(model)])


def test_qat_steps_lower_the_loss_and_move_f(tmp_path):
    trainer = trainer_for(tmp_path, steps=20, optimizer=dict(lr=3e-4, weight_decay=0.1))
    probe = next(iter(SyntheticLoader(vocab_size=trainer.vocab_size, seq_len=32, global_batch=16, seed=99)))
    f0 = f_values(trainer.model).clone()
    with torch.no_grad():
        before = trainer.objective(trainer.model, probe)[1]["kl"]
    trainer.run()
    with torch.no_grad():
        after = trainer.objective(trainer.model, probe)[1]["kl"]
    assert before > 1e-2                                 # 2-bit weights moved the student away from the teacher
    assert after < 0.7 * before, (before, after)
    moved = (f_values(trainer.model) - f0).abs()
    assert moved.max() > 1e-4 and (moved > 0).float().mean() > 0.5


def test_weight_decay_zero_on_qat_params(tmp_path):
    trainer = trainer_for(tmp_path)
    groups = {g["name"]: g for g in trainer.optimizer.param_groups}
    qat_ids = {id(p) for p in groups["qat"]["params"]}
    for _, module, attr, fq in qat_parametrizations(trainer.model):
        assert id(getattr(module.parametrizations, attr).original) in qat_ids and id(fq.f) in qat_ids
    assert groups["qat"]["weight_decay"] == 0.0
    assert groups["other"]["weight_decay"] == 0.1           # the norms keep the config's decay
    trainable = sum(1 for p in trainer.model.parameters() if p.requires_grad)
    assert len(groups["qat"]["params"]) + len(groups["other"]["params"]) == trainable


def test_ema_weights_differ_and_are_used_for_eval(tmp_path):
    trainer = trainer_for(tmp_path, steps=6)
    trainer.run()
    ema = trainer.hooks[0].ema
    name, raw = next((n, p) for n, p in trainer.model.named_parameters() if n.endswith("original"))
    assert not torch.equal(ema.shadow[name], raw)
    ids = torch.arange(20)[None] % 300
    raw_before = raw.detach().clone()
    with torch.no_grad():
        logits_raw = trainer.model(ids)
        with trainer.eval_model() as m:
            assert torch.equal(dict(m.named_parameters())[name], ema.shadow[name])
            logits_ema = m(ids)
    assert not torch.allclose(logits_raw, logits_ema)
    assert torch.equal(raw, raw_before) and trainer.model.training     # trained values back after eval
    # the EMA follows its formula: replay the decays the hook logged against a manual average is costly, so
    # check the last update instead: shadow_n = d * shadow_{n-1} + (1 - d) * param_n
    d = trainer.hooks[0].ema.decay
    prev = ema.shadow[name].clone()
    with torch.no_grad():
        raw.add_(0.01)
    ema.update()
    assert torch.allclose(ema.shadow[name], d * prev + (1 - d) * raw, atol=1e-7)


def test_resume_after_stop_repeats_metrics(tmp_path):
    full = trainer_for(tmp_path, "full", steps=8)
    full.run()
    part = trainer_for(tmp_path, "part", steps=8)
    part.run(stop_after=5)                 # last checkpoint at step 4; a kill after step 5 loses step 5
    resumed = trainer_for(tmp_path, "part", steps=8)
    assert resumed.restore_latest() == 4
    resumed.step = 0                        # run(resume=True) restores again itself
    resumed.run(resume=True)
    read = lambda d: [json.loads(x) for x in (tmp_path / d / METRICS_FILE).read_text().splitlines()]
    a, b = read("full"), read("part")
    assert [r["step"] for r in b] == list(range(1, 9))
    for key in ("loss", "kl", "f_mean", "grad_norm"):
        assert [r[key] for r in a] == [r[key] for r in b], key
    ea, eb = full.hooks[0].ema.shadow, resumed.hooks[0].ema.shadow
    assert all(torch.equal(ea[k], eb[k]) for k in ea)


def test_outputs_equal_the_fake_quantized_eval_forward(tmp_path):
    trainer = trainer_for(tmp_path, steps=3, spec=QATSpec(bits=2, levels=Levels.UNBALANCED))
    trainer.run()
    paths = save_qat_outputs(trainer, tmp_path / "out")
    baked = openafm.load(str(paths["model"])).model.eval()
    weights, info = load_quantized(paths["quantized"])
    ids = (torch.arange(24)[None] * 7) % 300
    with torch.no_grad(), trainer.eval_model() as m:
        expected = m(ids)
        for name, module, attr, _ in qat_parametrizations(m):
            assert torch.equal(weights[name].dequantize(), getattr(module, attr)), name
            assert torch.equal(dict(baked.named_parameters())[name], getattr(module, attr)), name
        assert set(baked_state_dict(m)) == set(baked.state_dict())
    assert torch.equal(baked(ids), expected)
    assert info["steps"] == 3 and {q.bits for n, q in weights.items() if n != "embed.weight"} == {2}
    assert weights["embed.weight"].bits == 4 and all(q.levels is Levels.UNBALANCED for n, q in weights.items()
                                                     if n != "embed.weight")


def test_unsupported_bits_and_bad_config_raise(tmp_path):
    with pytest.raises(ValueError, match="bits=5"):
        QATSpec(bits=5)
    with pytest.raises(ConfigError, match="teacher"):
        build_qat_trainer(qat_config(tmp_path / "x", objective=dict(kind="lm")), spec=QATSpec(), ema_decay=None,
                          model=small_logit_model())
    with pytest.raises(ConfigError, match="ema_decay=1.5"):
        trainer_for(tmp_path, ema_decay=1.5)



def test_packed_output_runs_from_packed_weights_and_records_the_base(tmp_path):
    """OUT/packed/: a real compressed checkpoint of the QAT weights — 2-bit planes at 1/8 of fp16, run by
    openafm.load from the packed codes with the baked model's logits, and tied to the model QAT started from."""
    from openafm.checkpoint.fingerprint import weights_fingerprint
    from openafm.checkpoint.compressed import COMPRESSED_FILE, load_compressed, read_metadata
    from openafm.nn.packed_linear import PackedLinear
    from openafm.errors import CheckpointError
    start = small_logit_model()
    base_hash = weights_fingerprint(start)
    trainer = build_qat_trainer(qat_config(tmp_path / "run", steps=2), spec=QATSpec(bits=2), ema_decay=0.9,
                                model=start)
    trainer.run()
    paths = save_qat_outputs(trainer, tmp_path / "out")
    meta = read_metadata(paths["packed"] / COMPRESSED_FILE)
    assert meta["base_sha256"] == base_hash
    assert {v["bits"] for k, v in meta["quantized"].items() if k != "embed"} == {2} and meta["quantized"]["embed"]["bits"] == 4
    packed = openafm.load(paths["packed"], packed_kernel="torch").model
    assert any(isinstance(m, PackedLinear) for m in packed.modules())
    baked = openafm.load(str(paths["model"])).model
    ids = (torch.arange(24)[None] * 5) % 300
    with torch.no_grad():
        torch.testing.assert_close(packed(ids), baked(ids), rtol=1e-5, atol=1e-5)
    assert weights_fingerprint(packed) == weights_fingerprint(baked)     # hashed by the weights it computes with
    with pytest.raises(CheckpointError, match=base_hash):
        load_compressed(paths["packed"] / COMPRESSED_FILE, base=small_logit_model(seed=1))
    with pytest.raises(ValueError, match="bfloat16"):
        openafm.load(paths["packed"], dtype="bfloat16")
    with pytest.raises(ValueError, match="packed_kernel='gpu'"):
        openafm.load(paths["packed"], packed_kernel="gpu")
    with pytest.raises(ValueError, match="packed_kernel='torch' applies to compressed checkpoint directories only"):
        openafm.load(str(paths["model"]), packed_kernel="torch")
