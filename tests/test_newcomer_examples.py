"""Every command example a newcomer is shown runs: the examples of each command's `-h` and the commands of the
code blocks of the README and of every docs/ page, executed at the smoke scale in a scratch results and data folder.
One smoke run of two mcan-pa Table V rows is shared by all of them (a run example keeps its stored units with
`--resume`; one that names no rows runs the first). Commands that need the network, a GPU, a Slurm account or the
real leaderboard are left out, and so is the fingerprint rerun (CPU-minutes), each named in NOT_RUN with its reason;
commands for downloaded data, a cluster or a released checkpoint run their plan (`--dry-run`) instead."""

from __future__ import annotations

import json
import re
import shlex
import time
from pathlib import Path

import pytest

from repro.cli import app

pytest.importorskip("matplotlib")

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]  # the README and the documentation site's pages
TABLE5 = "mcan-pa-table5-ablation"
SHARED_ROWS = "MCAN,MCAN+PA (ours)"  # the rows of the one smoke run the examples share

# (a fragment of the command as a page or the help writes it, why it is not run here)
NOT_RUN = (
    ("repro download vqa2", "network: fetches the datasets"),
    ("repro weights download", "network: fetches released checkpoints"),
    ("repro weights convert model.pth", "an official checkpoint from the network"),
    ("--device cuda", "a GPU"),
    ("--launcher slurm --partition gpu --account", "a Slurm account, and `...` stands for more options"),
    ("repro submit vqa2-test-dev", "the real EvalAI leaderboard"),
    ("repro submit --status", "the real EvalAI leaderboard"),
    ("repro submit vqa2-test-std", "the test split's question file, downloaded from the network"),
    ("repro submit TARGET", "the test split's question file, downloaded from the network"),
    (
        "check mcan-pa-table5-ablation --rerun",
        "CPU-minutes: retrains every row's synthetic fingerprint (no smoke "
        "fingerprints exist); tests/test_synthetic_regression.py runs it",
    ),
    ("repro prepare", "downloaded data (the network): each prepare reads a downloaded dataset or model"),
)
# placeholders filled otherwise than ID = mcan-pa-table5-ablation, ROW = MCAN
PLACEHOLDERS = (("--weights released", {"ID": "mcan-pa-table3-vqa2", "ROW": "MCAN"}),)
# commands for downloaded data, a cluster or a released checkpoint: their plan runs instead (`--dry-run`)
DRY_RUN = ("--limit 500", "--launcher slurm", "--weights released")


def _help_examples() -> list[str]:
    """The example commands every `-h` shows, the command groups' subcommands included."""
    import typer

    from repro.cli.common import help_examples

    def walk(command):
        yield command
        for sub in getattr(command, "commands", {}).values():  # a group's subcommands
            yield from walk(sub)

    found = []
    for command in walk(typer.main.get_command(app)):
        found += help_examples(command.callback.__doc__) if command.callback else []
    return found


def _page_examples() -> list[str]:
    """The `repro …` lines of the code blocks of the README and the docs/ pages: comments cut, continuations joined,
    `a / b` split."""
    return [example for page in PAGES for example in _code_block_examples(page.read_text(encoding="utf-8"))]


def _code_block_examples(text: str) -> list[str]:
    lines, inside, out = text.splitlines(), False, []
    joined: list[str] = []
    for line in lines:
        if line.startswith("```"):
            inside = not inside
            joined.append("")  # a block's last line never continues into the next block
            continue
        if not inside:
            continue
        if joined and joined[-1].endswith("\\"):
            joined[-1] = joined[-1][:-1] + " " + line.strip()
        else:
            joined.append(line.strip())
    for line in joined:
        line = re.split(r"\s{2,}#|^#", line)[0].strip()
        for part in line.split(" / "):
            if part.startswith("repro "):
                out.append(" ".join(part.split()))
    return out


def _runnable(example: str, smoke_question: int) -> list[str] | None:
    """The example's words as run here (None: not run, see NOT_RUN): placeholders filled, optional [parts] left out,
    the smoke scale for anything that trains or reads results, the shared rows where a run names none."""
    if any(fragment in example for fragment, _ in NOT_RUN):
        return None
    text = re.sub(r" \[--?[^\]]+\]", "", example)  # `[--rerun]`, `[--paper mcan-pa]`: optional, left out
    words = shlex.split(text)
    fill = next((f for fragment, f in PLACEHOLDERS if fragment in example), {"ID": TABLE5, "ROW": "MCAN"})
    words = [fill.get(w, w) for w in words]
    command = words[1] if words[1] not in ("-v", "-q") else words[2]
    if "--scale" in words:
        words[words.index("--scale") + 1] = "smoke"
    if "--question" in words:
        words[words.index("--question") + 1] = str(smoke_question)
    if any(fragment in example for fragment in DRY_RUN):
        return [*words[1:], "--dry-run"]
    if command in ("run", "train") and not {"--dry-run", "--status"} & set(words):
        if "--scale" not in words:
            words += ["--scale", "smoke"]
        if command == "run" and "--rows" not in words and words[words.index("run") + 1] == TABLE5:
            words += ["--rows", "MCAN"]  # a row of the shared run: kept (--resume), or new seeds trained for it
        if command == "run" and "--seeds" not in words and "--resume" not in words:
            words += ["--resume"]
        if command == "run" and "--rows" not in words:
            from repro.specs import resolve

            words += ["--rows", resolve(words[words.index("run") + 1]).rows[0].name]
    if command in ("table", "plot", "attention") and "--scale" not in words:
        words += ["--scale", "smoke"]
    return words[1:]


def _eval_files(folder: Path) -> None:
    """The files the `repro eval` examples name, in each metric's layout (a question or two each)."""
    vqa_answers = [{"answer": "yes", "answer_id": i + 1} for i in range(10)]
    files = {
        "v2_mscoco_val2014_annotations.json": {
            "annotations": [
                {"question_id": 1, "question_type": "is the", "answer_type": "yes/no", "answers": vqa_answers}
            ]
        },
        "v2_OpenEnded_mscoco_val2014_questions.json": {"questions": [{"question_id": 1, "question": "Is it?"}]},
        "results.json": [{"question_id": 1, "answer": "yes"}],
        "gold.json": [{"question_id": 1, "answers": ["cat", "cats"]}],
        "predictions.json": [{"question_id": 1, "answer": "cat"}],
        "gt.json": [{"question_id": 1, "answers": ["cat"]}],  # one answer: WUPS's layout, and ANLS reads it too
        "pred.json": [{"question_id": 1, "answer": "cat"}],
        "testdev_balanced_questions.json": {
            "01": {"answer": "yes", "types": {"structural": "verify", "detailed": "x"}, "isBalanced": True}
        },
        "gqa_predictions.json": [{"questionId": "01", "prediction": "yes"}],
    }
    for name, content in files.items():
        (folder / name).write_text(json.dumps(content))


@pytest.mark.slow
def test_every_example_of_the_help_and_the_docs_runs(runner, tmp_path, monkeypatch):
    monkeypatch.setenv("REPRO_RESULTS", str(tmp_path / "results"))
    monkeypatch.setenv("REPRO_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("COLUMNS", "120")
    monkeypatch.chdir(tmp_path)
    _eval_files(tmp_path)
    shared = runner.invoke(app, ["run", TABLE5, "--scale", "smoke", "--rows", SHARED_ROWS, "--seeds", "0"])
    assert shared.exit_code == 0, shared.output
    (questions,) = (tmp_path / "data").glob("synthetic/vqa2-*/raw/v2_OpenEnded_mscoco_val2014_questions.json")
    smoke_question = json.loads(questions.read_text())["questions"][0]["question_id"]

    examples = _help_examples() + _page_examples()
    assert len(_help_examples()) >= 15 and len(_page_examples()) >= 40
    stale = [fragment for fragment, _ in NOT_RUN + PLACEHOLDERS if not any(fragment in e for e in examples)]
    assert not stale, f"NOT_RUN/PLACEHOLDERS name no example any more: {stale}"
    ran, failed, times = 0, [], {}
    for example in dict.fromkeys(examples):  # each once, in order
        words = _runnable(example, smoke_question)
        if words is None:
            continue
        started = time.perf_counter()
        result = runner.invoke(app, words)
        times[example] = time.perf_counter() - started
        ran += 1
        written = words[words.index("-o") + 1] if "-o" in words and "--dry-run" not in words else None
        if result.exit_code != 0 or (written and not (tmp_path / written).is_file()):
            failed.append(f"{example}\n  ran: {shlex.join(words)}\n  {result.output.strip()[-600:]}")
    print("slowest:", sorted(times.items(), key=lambda kv: -kv[1])[:8])
    assert not failed, "\n".join(failed)
    assert ran >= 35


def test_every_page_example_is_run_or_named_with_a_reason():
    """Without running anything: the README's and every docs page's examples are read, and each is either turned
    into the words it runs with here or named in NOT_RUN with its reason."""
    per_page = {page.name: _code_block_examples(page.read_text(encoding="utf-8")) for page in PAGES}
    for name in ("README.md", "usage.md", "cluster.md", "data.md", "metrics.md"):
        assert per_page[name], f"{name}: no `repro` example read"
    unaccounted = [
        f"{page}: {example}"
        for page, examples in per_page.items()
        for example in examples
        if _runnable(example, smoke_question=1) is None and not any(f in example for f, _ in NOT_RUN)
    ]
    assert not unaccounted, unaccounted
