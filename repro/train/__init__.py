"""Training engine shared by every paper: recipes, schedules, checkpoints, the trainer, torchrun/DDP.

Entry points: `load_recipe(name)`, `fit(model, dataset, recipe, workdir)`, `predict(model, dataset, batch_size)`.
"""

from __future__ import annotations

from repro.train.recipe import Recipe, load_recipe  # load_recipe: a file; by name: repro.families.load_recipe

__all__ = ["Recipe", "load_recipe", "fit", "predict", "TrainState", "TrainingInterrupted"]


def __getattr__(name: str):  # the trainer pulls in rich and torch.distributed; load it on first use
    if name in ("fit", "predict", "TrainState", "TrainingInterrupted"):
        from repro.train import trainer

        return getattr(trainer, name)
    raise AttributeError(name)
