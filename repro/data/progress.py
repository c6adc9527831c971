"""Rich progress bars for the data layer: bytes per file for transfers and hashing, items for preparation."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from rich.console import Console
from rich.progress import (
    BarColumn,
    DownloadColumn,
    MofNCompleteColumn,
    Progress,
    TaskID,
    TextColumn,
    TimeRemainingColumn,
    TransferSpeedColumn,
)


def byte_progress(console: Console | None = None, disable: bool = False) -> Progress:
    return Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        DownloadColumn(),
        TransferSpeedColumn(),
        TimeRemainingColumn(),
        console=console,
        disable=disable,
        transient=False,
    )


def item_progress(console: Console | None = None, disable: bool = False) -> Progress:
    return Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeRemainingColumn(),
        console=console,
        disable=disable,
        transient=False,
    )


class Bar:
    """One task of a Progress, or nothing when no Progress was given (library use, tests)."""

    def __init__(self, progress: Progress | None, description: str, total: float | None) -> None:
        self.progress = progress
        self.task: TaskID | None = progress.add_task(description, total=total) if progress is not None else None

    def advance(self, amount: float) -> None:
        if self.progress is not None and self.task is not None:
            self.progress.advance(self.task, amount)

    def update(self, **kwargs) -> None:
        if self.progress is not None and self.task is not None:
            self.progress.update(self.task, **kwargs)


@contextmanager
def maybe(progress: Progress | None) -> Iterator[Progress | None]:
    """Start `progress` for the duration of the block unless it is None or already running."""
    if progress is None or progress.live.is_started:
        yield progress
        return
    with progress:
        yield progress
