"""How many PyTorch threads each process of `repro run` takes (its share of the cores, or OMP_NUM_THREADS), and the
note it gives where other work already holds cores: a process with more threads than free cores waits at every
parallel operation for a thread that is not running."""

from __future__ import annotations

import logging

import pytest
import torch

from repro import load
from repro.launch import local
from repro.load import Load, free_cores, oversubscribed, threads_per_process


@pytest.fixture(autouse=True)
def _no_thread_setting(monkeypatch):
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)


def test_the_cores_are_split_between_the_processes(monkeypatch):
    monkeypatch.setattr(load, "cores", lambda: 16)
    assert [threads_per_process(j) for j in (1, 2, 3, 32)] == [16, 8, 5, 1]  # never none


def test_omp_num_threads_wins(monkeypatch):
    monkeypatch.setattr(load, "cores", lambda: 16)
    monkeypatch.setenv("OMP_NUM_THREADS", "3")
    assert threads_per_process(2) == 3  # a count per process, whatever the jobs
    monkeypatch.setenv("OMP_NUM_THREADS", "0")  # not a count: the cores decide
    assert threads_per_process(2) == 8


def test_free_cores_are_the_cores_other_work_leaves():
    assert [free_cores(Load(a, 2)) for a in (0.1, 0.9, 1.2, 5.0)] == [2, 1, 1, 1]
    assert free_cores(Load(6.2, 16)) == 10


def test_more_threads_than_free_cores_are_oversubscribed():
    assert oversubscribed(2, 1, Load(1.0, 2))  # another run holds one of two cores
    assert not oversubscribed(2, 1, Load(0.2, 2)) and not oversubscribed(1, 2, Load(0.2, 2))
    assert not oversubscribed(1, 1, Load(5.0, 2))  # one thread never waits for another
    assert oversubscribed(4, 3, Load(6.2, 16)) and not oversubscribed(2, 3, Load(6.2, 16))
    assert not oversubscribed(2, 1, None)  # no load average (Windows): nothing to say


def test_a_run_on_a_busy_machine_says_how_to_avoid_the_wait(monkeypatch, caplog):
    monkeypatch.setattr(load, "current", lambda: Load(1.0, 2))
    monkeypatch.setattr(load, "cores", lambda: 2)
    with caplog.at_level(logging.INFO, logger="repro.launch"):
        assert local._threads(1) == torch.get_num_threads()  # this process's own, untouched
        assert local._threads(2) == 1  # one thread each: the processes share the cores, no thread waits for another
    busy = [r.getMessage() for r in caplog.records if "other work holds cores" in r.getMessage()]
    assert len(busy) == (1 if torch.get_num_threads() > 1 else 0)
    assert all("(load 1.0 on 2 cores)" in m and "OMP_NUM_THREADS=1" in m for m in busy)


def test_an_idle_machine_gives_no_note(monkeypatch, caplog):
    monkeypatch.setattr(load, "current", lambda: Load(0.2, 2))
    with caplog.at_level(logging.INFO, logger="repro.launch"):
        local._threads(1)
        local._threads(2)
    assert "other work" not in caplog.text
