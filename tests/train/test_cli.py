"""`openafm train` and `openafm plot` through the CLI entry point, in this process."""

from openafm.cli import main
from openafm.train.metrics import read_metrics
from train._runs import tiny_config, write_config


def test_train_then_plot(tmp_path, capsys):
    run = tmp_path / "run"
    cfg = write_config(tmp_path / "c.yaml", tiny_config(run, steps=6, schedule=dict(kind="constant"),
                                                         log_every=2))
    assert main(["train", str(cfg)]) == 0
    assert [r["step"] for r in read_metrics(run / "metrics.jsonl")] == [2, 4, 6]
    assert "step 6: loss" in capsys.readouterr().out
    assert main(["plot", str(run)]) == 0
    png = (run / "curves.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 10_000


def test_bad_config_key_is_named(tmp_path, capsys):
    cfg = write_config(tmp_path / "c.yaml", tiny_config(tmp_path / "r", optimiser=dict(lr=1)))
    assert main(["train", str(cfg)]) == 2
    assert "unknown keys ['optimiser']" in capsys.readouterr().err


def test_plot_of_an_empty_run_dir_fails_loudly(tmp_path, capsys):
    assert main(["plot", str(tmp_path)]) == 2
    assert "metrics.jsonl: no metrics to plot" in capsys.readouterr().err
