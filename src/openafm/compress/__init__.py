"""Compression: what MAKES compressed models (QAT, RTN, group quantization, ASTC, SVD pull-out, LoRA recovery).

Running them is elsewhere: packed layers in openafm.nn.pack/packed_*; the format in openafm.checkpoint.compressed.

    targets.py       which tensors of a decoder are quantized, and in which role (weight, embedding)
    levels.py        level sets of a b-bit uniform quantizer (balanced / unbalanced zero point)
    fake_quant.py    fake quantization with a learnable clipping factor (straight-through estimator for W)
    clip_init.py     clipping-factor initialisation by Newton-Raphson on the quantization MSE
    qat.py           QAT set-up: FakeQuantize parametrizations on every target, export, optimizer groups
    qat_train.py     QAT on the trainer: QATHooks, distillation from the unquantized model, EMA, saved outputs
    ema.py           exponential moving average of the trainable parameters, swapped in for evaluation
    quantized.py     QuantizedWeight: codes, scale and zero point of an exported quantized matrix
    quantized_io.py  exported QAT weights on disk, one safetensors file
    rtn.py           round-to-nearest baselines on the same level sets as QAT (no training)
    group_quant.py   asymmetric min/max group quantization: the baseline beside ASTC at the same bits per weight
    astc.py          ASTC block compression of weight matrices through the ARM codec (astc-encoder-py)
    svd_pullout.py   SVD pull-out (PiSSA-like): top-r singular directions into a LoRA adapter, the residual compressed
    recovery.py      LoRA quality recovery on a frozen compressed base, saved as an adapter tied to its fingerprint
"""

from openafm.compress.astc import astc_compress_model
from openafm.compress.group_quant import group_quantize_model
from openafm.compress.qat import QATSpec, export_model, prepare_qat
from openafm.compress.qat_train import build_qat_trainer, save_qat_outputs
from openafm.compress.recovery import build_recovery_trainer, save_recovery_adapter
from openafm.compress.rtn import quantize_model_rtn
from openafm.compress.svd_pullout import pull_out

__all__ = ["QATSpec", "astc_compress_model", "build_qat_trainer", "build_recovery_trainer", "export_model",
           "group_quantize_model", "prepare_qat", "pull_out", "quantize_model_rtn", "save_qat_outputs",
           "save_recovery_adapter"]
