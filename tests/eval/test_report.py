"""`openafm eval compare`: runs side by side (a missing task shows a dash), per-language rows, and a PNG chart."""

from openafm.eval.report import compare_chart, compare_table, markdown_table


def summary(value, with_lang=True):
    tasks = {"mmlu_wordnet": {"metric": "acc_loglik", "value": value, "ci95": [0.1, 0.9], "n": 10, "chance": 0.25,
                              "shots": 0, "metrics": {"acc_loglik": value, "acc_gen": 0.1}, "by_language": {}},
             "perplexity_heldout": {"metric": "perplexity", "value": 18.2, "ci95": None, "n": 4, "chance": 49152.0,
                                    "shots": 0, "metrics": {"perplexity": 18.2, "tokens": 2044}, "by_language": {}}}
    if with_lang:
        tasks["mmmlu_udhr"] = {"metric": "acc_loglik", "value": 0.3, "ci95": [0.2, 0.4], "n": 24, "chance": 0.25,
                               "shots": 0, "metrics": {"acc_loglik": 0.3, "acc_gen": 0.0},
                               "by_language": {"en": {"n": 12, "acc_loglik": 0.5, "ci95": [0.25, 0.75]},
                                               "ja": {"n": 12, "acc_loglik": 0.1, "ci95": [0.01, 0.35]}}}
    return {"run": {"model": "m", "dtype": "float32", "seed": 0, "limit": 10}, "tasks": tasks}


def test_compare_table_and_chart(tmp_path):
    text = compare_table([summary(0.4), summary(0.6, with_lang=False)], ["fp32", "bf16"])
    lines = text.splitlines()
    assert lines[0] == "| task | metric | chance | fp32 | bf16 |"
    assert "| mmlu_wordnet | acc_loglik | 0.250 | 0.400 [0.10, 0.90] | 0.600 [0.10, 0.90] |" in lines
    assert "| mmmlu_udhr [ja] | acc_loglik | 0.250 | 0.100 [0.01, 0.35] | — |" in lines
    assert "| perplexity_heldout | perplexity | 49,152 | 18.200 | 18.200 |" in lines
    png = compare_chart([summary(0.4), summary(0.6)], ["fp32", "bf16"], tmp_path / "c.png")
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_markdown_table_has_a_row_per_language():
    text = markdown_table(summary(0.4))
    assert "| mmlu_wordnet | 0 | 10 | acc_loglik | 0.400 [0.10, 0.90] | acc_gen 0.100 | 0.250 |" in text
    assert "mmmlu_udhr [en] | 0 | 12 | acc_loglik | 0.500 [0.25, 0.75] |" in text
