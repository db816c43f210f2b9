"""The lm-evaluation-harness class ("openafm"): one local task scored by lm-eval through it and by `openafm eval`
gives the same number; rolling log-likelihood equals a naive sum; generate_until stops at `until`."""

import json
import os

import pytest
import torch
import torch.nn.functional as F

lm_eval = pytest.importorskip("lm_eval", reason="lm-eval is a dev extra (pip install lm-eval)")

from openafm.checkpoint.load import LoadedModel  # noqa: E402
from openafm.eval.harness import run_eval  # noqa: E402
from openafm.eval.lm_eval_model import OpenAFMLM  # noqa: E402
from openafm.eval.mc import mc_prompt  # noqa: E402
from openafm.eval.registry import get_task  # noqa: E402
from tiny import make_tiny  # noqa: E402

TASK_YAML = os.path.join(os.path.dirname(__file__), "lm_eval_task", "openafm_mmlu_wordnet.yaml")


@pytest.fixture(scope="module")
def loaded(tokenizer):
    return LoadedModel(make_tiny("smollm2-tiny", vocab_size=tokenizer.vocab_size, max_seq_len=1024, seed=3).eval(),
                       tokenizer, "tiny", "test")


class Req:
    def __init__(self, *args):
        self.args = args


def test_lm_eval_and_openafm_eval_give_the_same_accuracy(loaded, tmp_path, monkeypatch):
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    task = get_task("mmlu_wordnet")
    ours = run_eval(loaded, [task], limit=12, out=tmp_path / "run", config={"model": "tiny", "adapter": None,
                    "dtype": "float32", "seed": 0}, batch_size=4, progress=False)["tasks"]["mmlu_wordnet"]
    data = tmp_path / "items.jsonl"
    data.write_text("".join(json.dumps({"prompt": mc_prompt(q, []), "answer": q.answer}) + "\n"
                            for q in task.build(12, 0, loaded.tokenizer).items))
    tasks_dir = tmp_path / "tasks"
    tasks_dir.mkdir()
    with open(TASK_YAML) as f:
        (tasks_dir / "task.yaml").write_text(f.read().replace("DATA_FILE", str(data)))
    from lm_eval import simple_evaluate
    from lm_eval.tasks import TaskManager
    result = simple_evaluate(model=OpenAFMLM(loaded=loaded, batch_size=4), tasks=["openafm_mmlu_wordnet"],
                             task_manager=TaskManager(include_path=str(tasks_dir)), log_samples=False)
    theirs = result["results"]["openafm_mmlu_wordnet"]["acc,none"]
    assert theirs == pytest.approx(ours["metrics"]["acc_loglik"], abs=1e-9)
    assert ours["n"] == 12


def test_the_class_is_registered_as_openafm():
    from lm_eval.api.registry import get_model
    assert get_model("openafm") is OpenAFMLM


def test_loglikelihood_rolling_is_the_whole_text_after_eos(loaded):
    tok, model = loaded.tokenizer, loaded.model
    text = "The Debian Reference is a book about the Debian system, written for users and administrators."
    lm = OpenAFMLM(loaded=loaded, max_length=8)                       # several windows
    got, = lm.loglikelihood_rolling([Req(text)])
    ids = [tok.eos_token_id] + tok.encode(text)
    with torch.no_grad():
        logp = F.log_softmax(model(torch.tensor([ids])).double(), -1)[0]
    full_context = sum(float(logp[i - 1, ids[i]]) for i in range(1, len(ids)))
    windowed = OpenAFMLM(loaded=loaded, max_length=1024).loglikelihood_rolling([Req(text)])[0]
    assert windowed == pytest.approx(full_context, abs=1e-3)           # one window: exactly the naive sum
    assert got != pytest.approx(full_context, abs=1e-3)                 # short windows see less context


def test_loglikelihood_and_generate_until(loaded):
    lm = OpenAFMLM(loaded=loaded)
    (lp, greedy), = lm.loglikelihood([Req("Question: 2 + 2 = ?\nAnswer:", " 4")])
    assert lp < 0 and isinstance(greedy, bool)
    free, = lm.generate_until([Req("Once upon a time", {"max_gen_toks": 12})])
    cut, = lm.generate_until([Req("Once upon a time", {"until": [free[3:6]], "max_gen_toks": 12})])
    assert free and free.startswith(cut) and len(cut) < len(free)
    with pytest.raises(ValueError, match="decodes greedily"):
        lm.generate_until([Req("x", {"do_sample": True, "temperature": 0.7})])
