"""Who trained a stored network (`repro.weights_store`): the commit its run started at, not the checkout's state when
the training ends (a commit made meanwhile is not the code that trained it), in `repro run -j N`'s workers too."""

from __future__ import annotations

import json
import multiprocessing
from concurrent.futures import ProcessPoolExecutor

import torch

from repro import results
from repro.launch import local
from repro.weights_store import WeightsStore

KEY = f"{0xC0FFEE:016x}"


def test_a_stored_training_names_the_commit_its_run_started_at(sandbox, monkeypatch):
    monkeypatch.setattr(results, "_ENVIRONMENT", {"git_commit": "abc-at-the-start"})
    store = WeightsStore("trained", "training")
    unit = {"spec": "s", "row": "r", "seed": 0}
    got = store.shared([KEY], [{}], [unit], lambda missing: [({"w": torch.ones(1)}, {})])
    assert got[0][1]["trained_by"]["commit"] == "abc-at-the-start"
    saved = json.loads((sandbox / "data" / "trained" / KEY / "provenance.json").read_text())
    assert saved["trained_by"]["commit"] == "abc-at-the-start"


def test_a_worker_takes_its_parents_environment():
    spawn = multiprocessing.get_context("spawn")
    taken = {"git_commit": "abc-at-the-start", "threads": 9, "command": ["repro", "run"]}
    with ProcessPoolExecutor(1, mp_context=spawn, initializer=local._init_worker, initargs=(1, taken)) as pool:
        assert pool.submit(results.run_commit).result() == "abc-at-the-start"
