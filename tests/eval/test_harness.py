"""The `openafm eval` run: resume after a kill (no duplicates, same summary), per-language splits, and typed
errors for bad input (unknown task, missing data package, --limit 0, a model without a tokenizer)."""

import dataclasses
import json

import pytest

from openafm.checkpoint.load import LoadedModel
from openafm.cli import main
from openafm.errors import ConfigError, MissingTaskDataError, MissingTokenizerError, UnknownTaskError
from openafm.eval.harness import read_records, run_eval, summarize
from openafm.eval.registry import TASKS, DataNeed, get_task
from tiny import make_tiny

CONFIG = {"model": "tiny", "adapter": None, "dtype": "float32", "seed": 0}


@pytest.fixture(scope="module")
def tiny_lm(tokenizer):
    return LoadedModel(make_tiny("smollm2-tiny", vocab_size=tokenizer.vocab_size, max_seq_len=1024).eval(),
                       tokenizer, "tiny", "test")


class Killed(Exception):
    pass


def test_resume_after_a_kill_gives_no_duplicates_and_the_same_summary(tiny_lm, tmp_path):
    task = get_task("mmlu_wordnet")
    whole = run_eval(tiny_lm, [task], limit=7, out=tmp_path / "whole", config=CONFIG, batch_size=3, progress=False)

    seen = []

    def die_after_4(task, record):
        seen.append(record["id"])
        if len(seen) == 4:
            raise Killed()
    with pytest.raises(Killed):
        run_eval(tiny_lm, [task], limit=7, out=tmp_path / "cut", config=CONFIG, batch_size=3, progress=False,
                 on_item=die_after_4)
    assert len(read_records(tmp_path / "cut" / "mmlu_wordnet.jsonl")) == 4
    again = []
    resumed = run_eval(tiny_lm, [task], limit=7, out=tmp_path / "cut", config=CONFIG, batch_size=3, progress=False,
                       on_item=lambda t, r: again.append(r["id"]))
    lines = (tmp_path / "cut" / "mmlu_wordnet.jsonl").read_text().splitlines()
    ids = [json.loads(line)["id"] for line in lines]
    assert len(ids) == len(set(ids)) == 7                          # every item once
    assert set(again).isdisjoint(seen) and len(again) == 3          # only the rest was scored
    a, b = whole["tasks"]["mmlu_wordnet"], resumed["tasks"]["mmlu_wordnet"]
    for key in ("n", "value", "metrics", "ci95"):
        assert a[key] == b[key]
    whole_records = read_records(tmp_path / "whole" / "mmlu_wordnet.jsonl")
    assert {k: r["metrics"] for k, r in whole_records.items()} == {json.loads(x)["id"]: json.loads(x)["metrics"]
                                                                   for x in lines}
    assert (tmp_path / "cut" / "summary.md").read_text().count("| mmlu_wordnet |") == 1


def test_a_torn_last_line_is_dropped(tmp_path):
    path = tmp_path / "t.jsonl"
    path.write_text('{"id": "a", "metrics": {}}\n{"id": "b", "metr')
    assert list(read_records(path)) == ["a"]
    assert path.read_text() == '{"id": "a", "metrics": {}}\n'


def test_a_rerun_with_other_settings_is_refused(tiny_lm, tmp_path):
    task = get_task("mmlu_wordnet")
    run_eval(tiny_lm, [task], limit=2, out=tmp_path, config=CONFIG, progress=False)
    with pytest.raises(ConfigError, match="limit: 2 there, 3 now"):
        run_eval(tiny_lm, [task], limit=3, out=tmp_path, config=CONFIG, progress=False)


def test_per_language_splits(tiny_lm, tmp_path):
    summary = run_eval(tiny_lm, [get_task("mmmlu_udhr")], limit=2, out=tmp_path, config=CONFIG, progress=False)
    t = summary["tasks"]["mmmlu_udhr"]
    records = read_records(tmp_path / "mmmlu_udhr.jsonl").values()
    assert sorted(t["by_language"]) == sorted(["en", "de", "es", "fr", "it", "ja", "pt", "zh", "ru", "ar", "hi", "ko"])
    assert t["n"] == 24 and all(row["n"] == 2 for row in t["by_language"].values())
    for lang, row in t["by_language"].items():
        mine = [r for r in records if r["lang"] == lang]
        assert row["acc_loglik"] == sum(r["metrics"]["acc_loglik"] for r in mine) / 2
        assert all(r["id"].startswith(f"udhr:{lang}:") for r in mine)


def test_summary_by_language_on_hand_made_records():
    task = get_task("mmmlu_debian_reference")
    recs = [{"lang": lang, "metrics": {"acc_loglik": s, "acc_gen": 0.0}}
            for lang, s in [("en", 1.0), ("en", 0.0), ("ja", 1.0), ("ja", 1.0), ("ja", 0.0)]]
    out = summarize(task, recs, 0.25)
    assert out["value"] == 0.6 and out["by_language"]["en"]["acc_loglik"] == 0.5
    assert out["by_language"]["ja"]["acc_loglik"] == pytest.approx(2 / 3) and out["by_language"]["ja"]["n"] == 3


def test_perplexity_summary_pools_tokens():
    task = get_task("perplexity_heldout")
    recs = [{"lang": "en", "metrics": {"nll": 10.0, "tokens": 5}},
            {"lang": "en", "metrics": {"nll": 30.0, "tokens": 15}}]
    assert summarize(task, recs, 49152)["value"] == pytest.approx(2.718281828 ** 2)


def test_unknown_task_lists_the_known_ones():
    with pytest.raises(UnknownTaskError, match="'mmlu'; known tasks: mmlu_wordnet, mmlu_reasoning"):
        get_task("mmlu")


def test_missing_data_names_the_package_and_the_install_command(tiny_lm, tmp_path):
    task = dataclasses.replace(TASKS["mmlu_wordnet"], data=(DataNeed("Debian wordnet-x", "apt-get install wordnet-x",
                                                                     lambda: False),))
    with pytest.raises(MissingTaskDataError, match="needs the package Debian wordnet-x.*apt-get install wordnet-x"):
        run_eval(tiny_lm, [task], limit=2, out=tmp_path, config=CONFIG, progress=False)
    assert not (tmp_path / "mmlu_wordnet.jsonl").exists()


def test_limit_zero_and_a_model_without_tokenizer(tiny_lm, tmp_path):
    with pytest.raises(ConfigError, match="--limit 0"):
        run_eval(tiny_lm, [get_task("mmlu_wordnet")], limit=0, out=tmp_path, config=CONFIG)
    bare = LoadedModel(tiny_lm.model, None, "tiny-no-tok", "test")
    with pytest.raises(MissingTokenizerError, match="'tiny-no-tok' has no tokenizer"):
        run_eval(bare, [get_task("mmlu_wordnet")], limit=2, out=tmp_path, config=CONFIG)


def test_cli_errors_exit_2_with_the_message(capsys):
    assert main(["eval", "--tasks", "nope", "--limit", "2"]) == 2
    assert "unknown evaluation task 'nope'; known tasks: mmlu_wordnet" in capsys.readouterr().err
    assert main(["eval", "--tasks", "mmlu_wordnet", "--limit", "0"]) == 2
    assert "--limit 0" in capsys.readouterr().err
    assert main(["eval", "list"]) == 0
    assert "mmmlu_udhr" in capsys.readouterr().out
