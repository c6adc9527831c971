"""One training stage of a row's seeds: alone for one seed (`repro.train.fit`), together for several
(`repro.train.ensemble`: the seeds' parameters, momentum copies and queues stacked, one vmapped step).

ALBEF's stages that train together: pre-training, retrieval fine-tuning, SNLI-VE and NLVR2 fine-tuning and the
grounding fine-tuning. Two stay one seed at a time, in the same process: NLVR2's text-assignment step (it draws its
image pairs with Python control flow on the batch's similarities) and VQA (the answer decoder is `transformers`'
BertLMHeadModel, whose causal and cross-attention masks branch on the data). Seeds trained together draw their
random masks (MLM, MIM, ITM negatives, dropout) from one generator, so a seed is another draw of its lone run's
training, not a copy of it (the same seeds together give the same numbers again).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from repro.families.ace_rpe.build import loss_step
from repro.families.base import RunContext


def train_stage(
    ctxs: list[RunContext], models: list, dataset, recipes: list, folder: str, collate, together: bool = True
) -> list[dict[str, Any]]:
    """Train `models[k]` on `dataset` by `recipes[k]` into `ctxs[k].workdir / folder`; per seed {"steps",
    "final_loss", "world_size"} (and "ensemble": the seeds it trained with). `together=False`: one after another."""
    from repro.train import fit
    from repro.train.ensemble import fit_ensemble

    ctx = ctxs[0]
    step = loss_step(getattr(models[0], "task", "retrieval"))
    if len(ctxs) > 1 and together:
        states = fit_ensemble(
            models,
            dataset,
            recipes,
            [Path(c.workdir) / folder for c in ctxs],
            loss_step=step,
            collate_fn=collate,
            resume=ctx.resume,
            progress=ctx.progress,
            device=ctx.device,
        )
        seeds = [c.seed for c in ctxs]
        return [{"steps": s.step, "final_loss": s.final_loss, "world_size": 1, "ensemble": seeds} for s in states]
    out = []
    for c, model, recipe in zip(ctxs, models, recipes):
        state = fit(
            model,
            dataset,
            recipe,
            Path(c.workdir) / folder,
            loss_step=step,
            collate_fn=collate,
            resume=c.resume,
            progress=c.progress,
            device=c.device,
        )
        out.append({"steps": state.step, "final_loss": state.final_loss, "world_size": state.world_size})
    return out
