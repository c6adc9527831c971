"""Generated data is written once (`repro.data.generated`): a second preparation of the same configuration writes
nothing, and one process at a time writes a folder. Before, a stored configuration read back from JSON (tuples as
lists) never equalled the one asked for, so every preparation wrote dsganet's scenes again, and two processes
preparing at once (pilots side by side, `-j 2` workers) read a feature store the other was rewriting."""

import multiprocessing
from pathlib import Path

import pytest
from filelock import FileLock, Timeout

from repro.data.generated import generating, same_config
from repro.families import for_row
from repro.specs import resolve, scale_settings

# one smoke table a family with generated data
SPECS = ["mcan-pa-table5-ablation", "dsganet-table7-ablation", "sa-m4c-table2-ablations", "psac-table3-vpsa"]


def test_a_stored_configuration_is_compared_as_json_keeps_it():
    assert same_config({"templates": [], "seed": 0}, {"templates": (), "seed": 0})
    assert same_config({"weights": [1, 0.5]}, {"weights": (1, 0.5)})
    assert not same_config({"templates": ["behind"]}, {"templates": ()})
    assert not same_config(None, {"seed": 0})


def _files(root: Path) -> dict[str, int]:
    return {str(p.relative_to(root)): p.stat().st_mtime_ns for p in root.rglob("*") if p.is_file()}


@pytest.mark.parametrize("spec_id", SPECS)
def test_a_second_preparation_of_the_same_configuration_writes_nothing(spec_id, tmp_path, monkeypatch):
    monkeypatch.setenv("REPRO_DATA_DIR", str(tmp_path))
    spec = resolve(spec_id)
    hooks, settings = for_row(spec.rows[0]), scale_settings(spec, "smoke")
    hooks.prepare_data(spec, "smoke", settings)
    first = _files(tmp_path)
    assert first
    hooks.prepare_data(spec, "smoke", settings)
    assert _files(tmp_path) == first


def _hold(folder: str, held, release) -> None:
    with generating(Path(folder)):
        held.set()
        release.wait()


def test_one_process_at_a_time_writes_a_folder(tmp_path):
    folder = tmp_path / "data" / "scenes"
    context = multiprocessing.get_context("spawn")
    held, release = context.Event(), context.Event()
    child = context.Process(target=_hold, args=(str(folder), held, release))
    child.start()
    try:
        assert held.wait(timeout=300)  # the child holds the lock (the bound only keeps a broken child from hanging)
        with pytest.raises(Timeout):
            FileLock(str(folder.parent / "scenes.lock"), timeout=0).acquire()
    finally:
        release.set()
        child.join()
    with generating(folder):  # free again once the child is done
        pass
