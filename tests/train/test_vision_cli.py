import json

from openafm.checkpoint.clip import load_vision_encoder, read_clip_metadata
from openafm.cli import main


def test_pretrain_writes_a_checkpoint_and_zero_shot_reads_it(tmp_path, capsys):
    out = tmp_path / "clip.safetensors"
    assert main(["vision", "pretrain", str(out), "--preset", "vision-tiny", "--sources", "digits", "--steps", "4",
                 "--batch-size", "8", "--image-size", "56", "--mask-ratio", "0.5", "--save-every", "2",
                 "--no-eval"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["steps"] == 4 and summary["images"] == 1797
    meta = read_clip_metadata(out)
    assert meta["steps_done"] == "4" and meta["mask_ratio"] == "0.5" and meta["preset"] == "vision-tiny"
    assert load_vision_encoder(out).config.width == 32
    assert main(["vision", "zero-shot", str(out), "--image-size", "56"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["style"] == "twitter" and result["classes"] > 1800 and 0 <= result["top1"] <= 1


def test_bad_sources_are_an_error_naming_them(capsys):
    assert main(["vision", "pretrain", "x.safetensors", "--sources", "emoji,photos"]) == 2
    assert "--sources 'emoji,photos'" in capsys.readouterr().err
