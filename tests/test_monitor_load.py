"""`repro run`'s estimate on a loaded machine: it says the machine is busy and by about how much the time stretches
(the load read from a fake source here; `repro.load.current` reads the 1-minute load average)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from rich.console import Console

from repro.load import Load, cores, current
from repro.monitor import RunMonitor, Unit, eta


def test_the_load_counts_as_busy_from_one_and_a_half_runs_per_core():
    assert (
        Load(7.6, 2).busy
        and Load(7.6, 2).stretch == pytest.approx(3.8)
        and Load(7.6, 2).words() == "load 7.6 on 2 cores"
    )
    assert not Load(2.0, 2).busy and Load(2.0, 2).stretch == 1.0  # the run alone keeps each core busy once
    assert not Load(0.1, 1).busy and Load(0.1, 1).stretch == 1.0 and Load(3.0, 2).busy
    assert cores() >= 1
    now = current()
    assert now is None or (now.average >= 0 and now.cores == cores())


def test_the_estimate_says_when_the_machine_is_busy():
    assert eta(60, 0.25, 1) == "ETA 0:03:00"
    assert eta(60, 0.25, 1, Load(1.0, 2)) == "ETA 0:03:00"
    busy = eta(60, 0.25, 1, Load(7.6, 2))
    assert busy == "ETA 0:03:00 (machine busy: load 7.6 on 2 cores, so about 3.8× an idle machine's time)"
    assert eta(0, 0, 1, Load(7.6, 2)).startswith("ETA – (machine busy")


def _unit(tmp_path):
    folder = tmp_path / "seed0"
    folder.mkdir()
    line = {"epoch": 1, "epochs": 2, "step": 5, "steps": 10, "loss": 0.5}
    (folder / "train.jsonl").write_text(json.dumps(line) + "\n")
    return {("MCAN", 0): Unit("MCAN s0", folder)}


def test_the_progress_line_follows_the_load_as_it_changes(tmp_path):
    now = [Load(8.0, 2)]  # what the fake source reads (the monitor's own thread reads it too, every second)
    console = Console(record=True, width=300, force_terminal=False)
    with RunMonitor(console, _unit(tmp_path), heartbeat_s=3600, load=lambda: now[0]) as monitor:
        first = console.export_text(clear=False)
        assert "note: this machine is busy (load 8.0 on 2 cores)" in first and "about 4.0×" in first
        monitor._refresh()
        assert "machine busy: load 8.0 on 2 cores, so about 4.0×" in monitor.status_line()
        assert "MCAN s0: epoch 1/2" in monitor.status_line()
        now[0] = Load(0.5, 2)
        monitor._refresh()  # the other work ended: the line is a plain estimate again
        assert "busy" not in monitor.status_line() and "ETA" in monitor.status_line()


def test_an_idle_machine_or_one_without_a_load_average_gets_no_note(tmp_path):
    for source in (lambda: Load(1.9, 2), lambda: None):
        console = Console(record=True, width=300, force_terminal=False)
        with RunMonitor(console, {}, heartbeat_s=3600, load=source) as m:
            m._refresh()
            assert "busy" not in m.status_line()
        assert "busy" not in console.export_text()


def test_repro_tokenizes_on_the_calling_thread_unless_told_otherwise(monkeypatch):
    import repro.cli as cli

    monkeypatch.setattr(cli, "app", lambda **kwargs: None)
    monkeypatch.delenv("TOKENIZERS_PARALLELISM", raising=False)
    cli.main()
    assert os.environ["TOKENIZERS_PARALLELISM"] == "false"
    monkeypatch.setenv("TOKENIZERS_PARALLELISM", "true")
    cli.main()
    assert os.environ["TOKENIZERS_PARALLELISM"] == "true"  # the user's choice stands


@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="counts threads in /proc")
def test_a_serial_tokenizer_starts_no_threads(tmp_path):
    """The tokenizers pool is what `tokenizers_serial` turns off: with it a batch starts its workers, without none."""
    (tmp_path / "vocab.txt").write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "red", "circle"]))
    script = (
        "import os, sys\n"
        "from transformers import BertTokenizerFast\n"
        "tok = BertTokenizerFast(vocab_file=sys.argv[1], do_lower_case=True)\n"
        "before = len(os.listdir('/proc/self/task'))\n"
        "tok(['red circle'] * 64, padding='longest', return_tensors='pt')\n"
        "print(len(os.listdir('/proc/self/task')) - before)\n"
    )

    def threads_started(parallelism: str) -> int:
        env = {**os.environ, "TOKENIZERS_PARALLELISM": parallelism, "RAYON_NUM_THREADS": "2"}
        out = subprocess.run(
            [sys.executable, "-c", script, str(tmp_path / "vocab.txt")], env=env, capture_output=True, text=True
        )
        assert out.returncode == 0, out.stderr
        return int(out.stdout.strip().splitlines()[-1])

    assert threads_started("true") > 0
    assert threads_started("false") == 0
