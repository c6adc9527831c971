"""`repro weights ls` and `repro weights convert` on the golden-tensor fixtures."""

import json

import torch

from repro.cli import app
from tests.golden import fixture


def test_ls_lists_released_checkpoints(runner, sandbox):
    result = runner.invoke(app, ["weights", "ls", "--format", "json"])
    assert result.exit_code == 0, result.output
    rows = json.loads(result.output)
    assert {"ALBEF.pth", "flickr30k.pth"} <= {r["name"] for r in rows}
    by_name = {r["name"]: r for r in rows}
    # a sha256 only where published (mmf's zoo pins its archives); the rest download with none
    assert [r["name"] for r in rows if r["sha256"]] == ["m4c"] and by_name["m4c"]["sha256_from"].startswith("published")
    assert by_name["flickr30k.pth"]["dataset"] == "albef-checkpoints" and by_name["flickr30k.pth"]["url"].endswith(
        "/ALBEF/flickr30k.pth"
    )
    assert by_name["mcan-small"]["url"] is None and "OneDrive" in by_name["mcan-small"]["manual"]
    assert {r["on_disk"] for r in rows} == {"missing"}
    cells = by_name["mscoco.pth"]["cells"]
    assert cells == [{"spec": "ace-rpe-table3-sota", "row": "ALBEF (14M)", "columns": "coco-retrieval"}]
    result = runner.invoke(app, ["weights", "ls"], env={"COLUMNS": "300"})
    assert result.exit_code == 0 and "albef-checkpoints/flickr30k.pth" in result.output and "missing" in result.output


def test_convert_mcan_fixture_writes_our_state_and_the_report(runner, tmp_path):
    folder = fixture("mcan")
    out = tmp_path / "mcan.pt"
    result = runner.invoke(
        app,
        [
            "weights",
            "convert",
            str(folder / "checkpoint.pth"),
            "--family",
            "mcan-pa",
            "--layout",
            "mcan-vqa",
            "-o",
            str(out),
            "--format",
            "json",
        ],
    )
    assert result.exit_code == 0, result.output
    report = json.loads(result.output)
    official = torch.load(folder / "checkpoint.pth", weights_only=True)["state_dict"]
    assert report["counts"] == {"placed": len(official), "reshaped": 0, "missing": 0, "unexpected": 0}
    saved = torch.load(out, weights_only=True)["model"]
    assert torch.equal(saved["classifier.weight"], official["proj.weight"])


def test_convert_sa_m4c_fixture_rich_report(runner, tmp_path):
    folder = fixture("sa-m4c")
    out = tmp_path / "sam.pt"
    args = ["weights", "convert", str(folder / "checkpoint.pth"), "--family", "sa-m4c", "--layout", "sam-textvqa"]
    result = runner.invoke(app, [*args, "-o", str(out)])
    assert result.exit_code == 0, result.output
    assert "key report" in result.output and out.is_file()


def test_convert_refuses_a_truncated_file_in_one_line_and_writes_nothing(runner, tmp_path):
    folder = fixture("mcan")
    bad = tmp_path / "bad.pth"
    bad.write_bytes((folder / "checkpoint.pth").read_bytes()[:1000])
    out = tmp_path / "out.pt"
    result = runner.invoke(
        app, ["weights", "convert", str(bad), "--family", "mcan-pa", "--layout", "mcan-vqa", "-o", str(out)]
    )
    assert result.exit_code == 2
    assert "bad.pth: not a readable PyTorch checkpoint" in result.output and "Traceback" not in result.output
    assert not out.exists()
    result = runner.invoke(
        app, ["weights", "convert", str(bad), "--family", "mcan-pa", "--layout", "mmf", "-o", str(out)]
    )
    assert result.exit_code == 2 and "--layout 'mmf' for mcan-pa" in result.output


def test_ls_reads_at_80_columns_and_never_cuts_a_url(runner):
    rows = json.loads(runner.invoke(app, ["weights", "ls", "--format", "json"]).output)
    result = runner.invoke(app, ["weights", "ls"], env={"COLUMNS": "80"})
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert len(lines) <= 45 and all(len(line) <= 80 for line in lines if "from " not in line)
    for r in rows:
        assert f"{r['name']}: {r['dataset']}/{r['file']} from {r['url'] or 'by hand'}" in result.output
