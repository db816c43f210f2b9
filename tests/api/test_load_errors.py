import pytest
import torch

import openafm
from openafm.errors import UnknownModelError


def test_unknown_model_lists_the_available_names():
    with pytest.raises(UnknownModelError) as e:
        openafm.load("no-such-model")
    message = str(e.value)
    assert "'no-such-model'" in message
    for name in ("smollm2-135m-instruct", "afm-ondevice-tiny", "afm-server-dense-tiny"):
        assert name in message


def test_config_only_preset_is_refused_with_its_size():
    with pytest.raises(ValueError, match="afm-ondevice-3b' is a report-scale config only \\(2.83B"):
        openafm.load("afm-ondevice-3b")


def test_bad_dtype_is_named():
    with pytest.raises(ValueError, match="dtype 'float8'"):
        openafm.load("afm-ondevice-tiny", dtype="float8")


def test_preset_loads_seeded_without_tokenizer():
    a, b = openafm.load("afm-ondevice-tiny", seed=3), openafm.load("afm-ondevice-tiny", seed=3)
    assert torch.equal(a.model.embed.weight, b.model.embed.weight)
    assert a.tokenizer is None
    with pytest.raises(ValueError, match="has no tokenizer"):
        a.generate("hello")
