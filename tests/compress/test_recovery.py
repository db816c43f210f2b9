"""LoRA recovery on a frozen compressed base: only the LoRA factors train, KD loss falls, and the adapter
file round-trips through fm's adapter path onto the same base (and is refused by another)."""

from __future__ import annotations

import json

import pytest
import torch
from compress._qat_helpers import PRESET, qat_config, small_logit_model

import openafm
import openafm.fm as fm
from openafm.checkpoint.native import save_checkpoint
from openafm.compress.recovery import build_recovery_trainer, save_recovery_adapter
from openafm.compress.rtn import quantize_model_rtn
from openafm.errors import ConfigError
from openafm.nn.lora import LoRALinear


def checkpoint(path, model, tokenizer):
    save_checkpoint(path, model.config, model.state_dict(), tokenizer)   # fm sessions need a tokenizer
    return str(path)


@pytest.fixture
def bases(tmp_path, tokenizer):
    """(fp32 teacher dir, 2-bit RTN base dir): the RTN model is the frozen compressed base."""
    fp32 = small_logit_model()
    teacher = checkpoint(tmp_path / "fp32", fp32, tokenizer)
    quantize_model_rtn(fp32, bits=2)
    return teacher, checkpoint(tmp_path / "rtn2", fp32, tokenizer)


def test_recovery_trains_only_lora_and_lowers_kl(tmp_path, bases):
    teacher, base = bases
    config = qat_config(tmp_path / "run", model=base, objective=dict(kind="kd", teacher=teacher), steps=16,
                        optimizer=dict(lr=3e-3, weight_decay=0.1))
    trainer, fingerprint = build_recovery_trainer(config, rank=4)
    frozen = {n: p.detach().clone() for n, p in trainer.model.named_parameters() if "lora_" not in n}
    trainable = [n for n, p in trainer.model.named_parameters() if p.requires_grad]
    assert trainable and all(n.endswith(("lora_A", "lora_B")) for n in trainable)
    assert [g["weight_decay"] for g in trainer.optimizer.param_groups] == [0.0]
    linears = [n for n, m in small_logit_model().named_modules() if isinstance(m, torch.nn.Linear)]
    assert sorted(n for n, m in trainer.model.named_modules() if isinstance(m, LoRALinear)) == sorted(linears)
    from openafm.train.synthetic import SyntheticLoader
    probe = next(iter(SyntheticLoader(vocab_size=trainer.vocab_size, seq_len=32, global_batch=16, seed=99)))
    with torch.no_grad():
        before = trainer.objective(trainer.model, probe)[1]["kl"]
    trainer.run()
    with torch.no_grad():
        after = trainer.objective(trainer.model, probe)[1]["kl"]
    assert before > 1e-2 and after < 0.8 * before, (before, after)
    for n, p in trainer.model.named_parameters():
        if n in frozen:
            assert torch.equal(p, frozen[n]), n          # the compressed base did not move

    path = save_recovery_adapter(trainer, tmp_path / "recovery.safetensors", fingerprint)
    ids = (torch.arange(20)[None] * 5) % 300
    with torch.no_grad():
        expected = trainer.model.eval()(ids)
    session_model = fm.SystemLanguageModel(adapter=fm.SystemLanguageModel.Adapter(path), model=base)
    lm_model = session_model.language_model().model
    with torch.no_grad():
        assert torch.allclose(lm_model(ids), expected, atol=1e-5)
        assert not torch.allclose(openafm.load(base).model(ids), expected, atol=1e-3)    # the adapter does something
    other = fm.SystemLanguageModel(adapter=fm.SystemLanguageModel.Adapter(path), model=teacher)
    with pytest.raises(fm.AssetsUnavailableError, match="adapter was trained for base model"):
        other.language_model()


def test_recovery_needs_an_unquantized_teacher(tmp_path, bases):
    _, base = bases
    with pytest.raises(ConfigError, match="another teacher"):
        build_recovery_trainer(qat_config(tmp_path / "x", model=base, objective=dict(kind="kd", teacher=base)), rank=4)
    with pytest.raises(ConfigError, match="rank=0"):
        build_recovery_trainer(qat_config(tmp_path / "y", model=base, objective=dict(kind="kd", teacher=PRESET)),
                               rank=0)


def test_cli_qat_then_recover(tmp_path, tokenizer, capsys):
    """`openafm qat` then `openafm recover` on a tiny model with the real tokenizer's vocabulary."""
    from tiny import make_tiny

    from openafm.checkpoint.adapter import read_adapter
    from openafm.checkpoint.fingerprint import weights_fingerprint
    from openafm.cli import main
    model = make_tiny(PRESET, vocab_size=tokenizer.vocab_size)
    src = checkpoint(tmp_path / "src", model, tokenizer)
    out = tmp_path / "qat"
    common = ["--steps", "2", "--batch-size", "2", "--seq-len", "16", "--checkpoint-every", "1"]
    assert main(["qat", src, str(out), "--bits", "2", "--levels", "unbalanced", *common]) == 0
    info = json.loads((out / "model" / "config.json").read_text())["qat"]
    assert info["source_model"] == src and info["levels"] == "unbalanced" and info["steps"] == 2
    assert (out / "quantized.safetensors").is_file() and len((out / "run" / "metrics.jsonl").read_text().splitlines()) == 2
    adapter = tmp_path / "rec.safetensors"
    assert main(["recover", str(out / "model"), str(adapter), "--rank", "2", *common]) == 0
    f = read_adapter(adapter)
    assert f.rank == 2 and f.base_fingerprint == weights_fingerprint(openafm.load(str(out / "model")).model)
    # the same adapter runs on the packed checkpoint (same dequantized weights, same fingerprint), unmerged
    from openafm.checkpoint.adapter import attach_adapter
    ids = (torch.arange(12)[None] * 11) % 300
    with torch.no_grad():
        on_baked = attach_adapter(openafm.load(str(out / "model")).model, f)(ids)
        packed = openafm.load(str(out / "packed"), packed_kernel="torch").model
        torch.testing.assert_close(attach_adapter(packed, f)(ids), on_baked, rtol=1e-5, atol=1e-5)
    lm = fm.SystemLanguageModel(model=str(out / "packed"), adapter=fm.SystemLanguageModel.Adapter(str(adapter)))
    assert lm.is_available() == (True, None), lm.unavailable_detail      # loads packed, attaches the adapter
    assert main(["qat", src, str(tmp_path / "bad"), "--bits", "5", *common]) != 0
    assert "bits=5 is not supported" in capsys.readouterr().err


def test_init_factors_start_the_adapter_at_the_pulled_out_product(tmp_path, bases):
    """ASTC + SVD path: the base holds the residual W - B A, the adapter starts at B A, so before training
    the adapted model computes the original W exactly (up to float rounding)."""
    from openafm.compress.svd_pullout import pull_out
    teacher, _ = bases
    fp32 = openafm.load(teacher).model
    ids = (torch.arange(20)[None] * 3) % 300
    with torch.no_grad():
        expected = fp32(ids)
    residual_model = openafm.load(teacher).model
    factors = {}
    with torch.no_grad():
        for name, module in residual_model.named_modules():
            if isinstance(module, torch.nn.Linear) and name.rsplit(".", 1)[-1] in ("qkv", "out", "gate_up", "down"):
                pulled = pull_out(module.weight, 4)
                module.weight.copy_(pulled.residual)
                factors[name] = pulled.adapter
    trainer, _ = build_recovery_trainer(qat_config(tmp_path / "run", model=str(tmp_path / "x"),
                                                   objective=dict(kind="kd", teacher=teacher), steps=1),
                                        rank=4, base=residual_model, init_factors=factors)
    with torch.no_grad():
        torch.testing.assert_close(trainer.model(ids), expected, rtol=1e-4, atol=1e-4)
    with pytest.raises(ConfigError, match="rank 4"):
        build_recovery_trainer(qat_config(tmp_path / "run2", model=str(tmp_path / "x"),
                                          objective=dict(kind="kd", teacher=teacher), steps=1),
                               rank=8, base=openafm.load(teacher).model, init_factors=factors)
