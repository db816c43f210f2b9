"""SystemLanguageModel(draft=fm.Draft(dir)): sessions generate speculatively with the same greedy text; an exported
adapter bundle brings its draft; a draft made for another model is refused."""

import asyncio
import copy

import pytest
import torch
from tiny import make_tiny

import openafm.fm as fm
from openafm.checkpoint.adapter import save_adapter
from openafm.checkpoint.fingerprint import weights_fingerprint
from openafm.nn.lora import apply_lora
from openafm.runtime.draft import build_draft, save_draft
from openafm.train.adapter_toolkit import export_bundle

pytestmark = pytest.mark.real_model


@pytest.fixture(scope="module")
def draft_dir(tmp_path_factory):
    """An untrained one-layer draft of the embedded model (the target's first layer, a 4,096-row head)."""
    lm = fm.SystemLanguageModel().language_model()
    return save_draft(tmp_path_factory.mktemp("draft") / "d", build_draft(lm.model, n_layers=1,
                                                                           vocab_ids=torch.arange(4096)))


def respond(model, prompts):
    async def go():
        session = fm.LanguageModelSession(model=model)
        out = [await session.respond(p, options=fm.GenerationOptions(maximum_response_tokens=24)) for p in prompts]
        return session, out
    return asyncio.run(go())


def test_session_with_a_draft_gives_the_same_greedy_text(draft_dir):
    prompts = ["Name a colour.", "And another one?"]                  # two turns: the caches continue
    _, plain = respond(fm.SystemLanguageModel(), prompts)
    session, spec = respond(fm.SystemLanguageModel(draft=fm.Draft(draft_dir)), prompts)
    assert spec == plain
    assert session._conversation.last_stats.proposed > 0              # it did run speculatively


def test_bundle_brings_its_draft_and_foreign_drafts_are_refused(draft_dir, tmp_path):
    lm = fm.SystemLanguageModel().language_model()
    adapted = copy.deepcopy(lm.model)
    apply_lora(adapted, rank=2, alpha=2, targets=("down",))                # lora_B = 0: the base's function
    adapter = save_adapter(tmp_path / "a.safetensors", adapted, base_name=lm.name,
                           base_fingerprint=weights_fingerprint(lm.model))
    bundle = export_bundle(adapter, tmp_path / "bundle", tokenizer=lm.tokenizer, draft=draft_dir)
    model = fm.SystemLanguageModel(adapter=fm.Adapter(bundle))
    assert model.draft is not None and model.draft.directory == bundle / "draft"
    assert model.draft_model().vocab_ids.shape == (4096,)
    tiny_dir = save_draft(tmp_path / "tiny", build_draft(make_tiny("smollm2-tiny"), n_layers=1))
    with pytest.raises(fm.AssetsUnavailableError, match="token embeddings"):
        fm.SystemLanguageModel(draft=fm.Draft(tiny_dir)).draft_model()
    with pytest.raises(fm.AssetsUnavailableError, match="not a draft directory"):
        fm.Draft(tmp_path / "missing")
