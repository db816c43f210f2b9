"""SystemLanguageModel's adapter (a LoRA file for the base weights) and the concurrent-request limit."""

import asyncio
import copy

import pytest
import torch

import openafm.fm as fm
from openafm.checkpoint.adapter import save_adapter
from openafm.checkpoint.fingerprint import weights_fingerprint
from openafm.nn.lora import apply_lora

pytestmark = pytest.mark.real_model


@pytest.fixture(scope="module")
def adapter_file(tmp_path_factory):
    """A strong random adapter on the embedded model's FFN down projections, and the model it describes."""
    lm = fm.SystemLanguageModel().language_model()
    adapted = copy.deepcopy(lm.model)
    apply_lora(adapted, rank=4, alpha=4, targets=("down",))
    torch.manual_seed(0)
    with torch.no_grad():
        for name, p in adapted.named_parameters():
            if "lora_B" in name:
                p.normal_(0, 0.2)
    path = save_adapter(tmp_path_factory.mktemp("adapter") / "strong.safetensors", adapted,
                        base_name=lm.name, base_fingerprint=weights_fingerprint(lm.model))
    return path, adapted


def test_adapter_model_computes_the_adapted_logits_and_the_base_stays_plain(adapter_file):
    path, adapted = adapter_file
    base = fm.SystemLanguageModel()
    with_adapter = fm.SystemLanguageModel(adapter=fm.SystemLanguageModel.Adapter(path))
    assert with_adapter.adapter.creator_defined_metadata["rank"] == 4
    ids = torch.tensor([base.language_model().encode("The capital of France is")])
    plain = base.language_model().model(ids)
    torch.testing.assert_close(with_adapter.language_model().model(ids), adapted(ids), rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(base.language_model().model(ids), plain, rtol=0, atol=0)
    adapted_down, base_down = with_adapter.language_model().model.layers[3].ffn.down.base, \
        base.language_model().model.layers[3].ffn.down
    assert adapted_down.blocks is base_down.blocks                              # base weights (native blocks) are shared
    assert "adapter strong.safetensors" in with_adapter.variant.display_name

    async def answer():
        session = fm.LanguageModelSession(model=with_adapter)
        text = await session.respond("Name a fruit.", options=fm.GenerationOptions(maximum_response_tokens=8))
        return session, text
    session, text = asyncio.run(answer())
    assert text and session._conversation.model is with_adapter.language_model().model   # runs the adapted model


def test_adapter_for_another_base_model_is_unavailable(tmp_path):
    from tiny import make_tiny
    tiny = make_tiny("smollm2-tiny")
    apply_lora(tiny, rank=2, alpha=2, targets=("down",))
    path = save_adapter(tmp_path / "tiny.safetensors", tiny, base_name="smollm2-tiny",
                        base_fingerprint="sha256:" + "0" * 64)
    model = fm.SystemLanguageModel(adapter=fm.Adapter(path))
    with pytest.raises(fm.AssetsUnavailableError, match="trained for base model 'smollm2-tiny'"):
        model.language_model()
    assert model.is_available() == (False, fm.SystemLanguageModelUnavailableReason.MODEL_NOT_READY)
    with pytest.raises(fm.AssetsUnavailableError, match="no such adapter file"):
        fm.Adapter(tmp_path / "missing.safetensors")


def test_requests_beyond_the_model_limit_raise_concurrent_requests_error():
    model = fm.SystemLanguageModel(max_concurrent_requests=1)
    opts = fm.GenerationOptions(maximum_response_tokens=4)

    async def go():
        s1, s2 = fm.LanguageModelSession(model=model), fm.LanguageModelSession(model=model)
        return await asyncio.gather(s1.respond("Hi.", options=opts), s2.respond("Hello.", options=opts),
                                    return_exceptions=True)
    first, second = asyncio.run(go())
    assert isinstance(first, str)
    assert isinstance(second, fm.ConcurrentRequestsError)
    assert "max_concurrent_requests=1" in str(second)
    with pytest.raises(ValueError, match="max_concurrent_requests must be a positive int, got 0"):
        fm.SystemLanguageModel(max_concurrent_requests=0)
