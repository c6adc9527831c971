"""Several seeds of one model trained together in one process: a stacked ensemble (torch.func).

`fit_ensemble(models, dataset, recipes, workdirs)` trains model k by recipe k (the recipes differ
only in their seed) as `repro.train.fit` would train it alone, with every seed's step computed in
one batched call: the models' parameters are stacked (`torch.func.stack_module_state`) and one
model's forward is mapped over them (`torch.func.vmap` of `functional_call`). What stays per seed:
  initialisation  the caller builds model k after seeding with seed k, as for a lone run;
  data order      seed k's sampler and batches are those of its lone run (a function of seed and
                  epoch), stacked along a new leading dimension (from a split held as ready tensors,
                  `repro.train.ready`, one gather of every seed's indices);
  attention       SDPA takes the seeds as more of its batch (`_folded_attention`), on the kernel a lone
                  run's call picks;
  dropout         `vmap(randomness="different")`: each seed draws its own masks (nn.Dropout's and attention's
                  as uniform numbers below 1 - p: `_Dropout`, `_folded_attention`). They come from one
                  generator seeded with the first seed, so they are not the masks of the lone run and
                  depend on which seeds train together: with dropout the ensemble's seed is another
                  draw of the same training, not a bit-wise copy of it (the same seeds together
                  repeat it exactly);
  optimiser       Adam/AdamW/Adamax/SGD act elementwise, so one optimiser over the stacked
                  parameters is one optimiser per seed; the summed loss gives each seed its own
                  gradient; gradient-norm clipping is computed per seed.
Every seed gets its own `train.jsonl`, `state.json` and `last.pt` in its own workdir, in the lone
run's formats: a seed's checkpoint is one `fit(..., resume=True)` continues alone, and an
interrupted ensemble continues from its seeds' checkpoints (`resume=True`) when every seed has one,
all at the same step (otherwise it starts from the beginning). Floating-point results differ from
the lone run's in the last bits (batched kernels sum in another order), so the two agree to within
the regression tolerance, not exactly.

A model with `lr_groups()` trains each group of every seed at its own multiple of the rate, as alone.
CPU and single-GPU only (no torchrun), fp32 or bf16.
"""

from __future__ import annotations

import copy
import math
import signal
import time
import warnings
from collections.abc import Callable, Iterable
from contextlib import contextmanager
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset

from repro.errors import ReproError
from repro.train import checkpoint as ckpt
from repro.train import distributed as dist_utils
from repro.train.loggers import MetricLoggers, open_loggers
from repro.train.ready import ReadyTensors
from repro.train.recipe import Recipe
from repro.train.schedule import learning_rate
from repro.train.trainer import (
    LOG_NAME,
    STATE_NAME,
    LossStep,
    TrainingInterrupted,
    TrainState,
    _autocast,
    _catch_signals,
    _progress,
    _rewrite_log,
    _StopFlag,
    build_optimizer,
    matmul_precision,
    recipe_loss_step,
    resolve_precision,
    to_device,
)
from repro.utils import write_json_atomic


@contextmanager
def _batched_kernels():
    """vmap rules for what torch batches slowly or not at all. nn.LSTM and nn.GRU have none: each seed runs torch's
    fused kernel (oneDNN on a CPU, cuDNN on a GPU) on its own slice of the stacked weights and inputs (`_per_seed`);
    for the LSTM 1.6x faster forward and backward than vmap through torch's cell-by-cell decomposition (6 seeds,
    Table V's synthetic sizes), and the GRU has no decomposition to fall back on. Attention (SDPA) takes the seeds
    as more of its batch (`_folded_attention`): one call, on the kernel SDPA picks for a lone run (the CPU's fused
    flash kernel where it can serve, the math kernel where the bias learns or dropout is on), not vmap's
    decomposition of the math kernel."""
    library = torch.library.Library("aten", "IMPL", "FuncTorchBatched")
    for op in (torch.ops.aten.lstm.input, torch.ops.aten.gru.input):
        library.impl(op, _per_seed(op))
    try:
        with _FoldedAttention(), warnings.catch_warnings():
            # an op without a batching rule (PSAC's F.multi_margin_loss) runs once per seed, which is what it costs
            # alone; torch's advice to file an issue about it is not the user's to act on
            warnings.filterwarnings("ignore", message="There is a performance drop because we have not yet")
            # cuDNN's note that each seed's RNN weights are copied into one buffer (`_no_weight_flattening`)
            warnings.filterwarnings("ignore", message="RNN module weights are not part of single contiguous chunk")
            yield
    finally:
        library._destroy()


class _FoldedAttention(torch.overrides.TorchFunctionMode):
    """`scaled_dot_product_attention` on a row's seeds (vmap's batched inputs) as one call over the seeds folded into
    the batch (`_folded_attention`). Intercepted before SDPA picks its kernel: it picks on vmap's batched inputs
    without seeing that a learned bias needs its gradient (the CPU's flash kernel then refuses it), and otherwise
    runs vmap's decomposition of the math kernel; here it picks for the folded inputs what it picks in a lone run."""

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func is torch.nn.functional.scaled_dot_product_attention:
            from torch._C._functorch import is_batchedtensor

            if any(is_batchedtensor(x) for x in (*args, *kwargs.values()) if isinstance(x, torch.Tensor)):
                return _folded_attention(*args, **kwargs)
        return func(*args, **kwargs)


def _folded_attention(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, *, scale=None, **kw):
    """`scaled_dot_product_attention` of a row's seeds: the seeds folded into the inputs' first dimension ([seeds x
    batch, heads, L, E]), one call, unfolded. Each (seed, sample) is computed as in its lone run; a mask is expanded
    per seed where it differs by sample or seed, and one shared by all of them stays shared."""
    from torch._C._functorch import _add_batch_dim, _unwrap_batched, maybe_get_level

    level = max(maybe_get_level(x) for x in (query, key, value, attn_mask) if isinstance(x, torch.Tensor))
    rank = query.dim()  # the seed's own (logical) rank; every input broadcasts to it
    seeds = next(v.shape[d] for v, d in (_unwrap_batched(x, level) for x in (query, key, value)) if d is not None)

    def seeds_first(x: torch.Tensor) -> torch.Tensor:
        """[seeds, *x's logical shape left-padded to `rank`]; unbatched x expanded (no copy)."""
        physical, dim = _unwrap_batched(x, level)
        physical = physical.expand(seeds, *physical.shape) if dim is None else physical.movedim(dim, 0)
        return physical.reshape(seeds, *(1,) * (rank - x.dim()), *physical.shape[1:])

    def fold(x: torch.Tensor, first: int) -> torch.Tensor:
        if rank == 2:  # [L, E]: the seeds are the batch
            return x
        return x.expand(seeds, first, *x.shape[2:]).reshape(seeds * first, *x.shape[2:])

    first = query.shape[0]
    q, k, v = (fold(seeds_first(x), first) for x in (query, key, value))
    mask = attn_mask
    if attn_mask is not None:
        unbatched = _unwrap_batched(attn_mask, level)[1] is None
        if unbatched and (attn_mask.dim() < rank or attn_mask.shape[0] == 1 or rank == 2):
            mask = _unwrap_batched(attn_mask, level)[0]  # the same for every sample and seed: broadcast as it is
        else:
            mask = fold(seeds_first(attn_mask), first)
    if dropout_p > 0:  # each seed its own mask, drawn at vmap's level (in-place draws on the folded map it refuses)
        keep = torch.rand(*query.shape[:-1], key.shape[-2], device=query.device) < 1 - dropout_p
        out = _math_attention(q, k, v, mask, dropout_p, fold(seeds_first(keep), first), is_causal, scale)
    else:
        out = torch.nn.functional.scaled_dot_product_attention(
            q, k, v, attn_mask=mask, is_causal=is_causal, scale=scale, **kw
        )
    return _add_batch_dim(out if rank == 2 else out.reshape(seeds, first, *out.shape[1:]), 0, level)


def _math_attention(q, k, v, mask, dropout_p: float, keep, is_causal: bool, scale: float | None) -> torch.Tensor:
    """SDPA's math kernel (what it runs with dropout on) with a given dropout mask: softmax(q·kᵀ·scale + mask), its
    dropped entries zeroed and the rest scaled by 1 / (1 - p), times v."""
    logits = (q * (scale if scale is not None else q.shape[-1] ** -0.5)) @ k.transpose(-2, -1)
    if is_causal:
        causal = torch.ones(logits.shape[-2:], dtype=torch.bool, device=logits.device).tril()
        mask = (
            causal
            if mask is None
            else (mask & causal if mask.dtype == torch.bool else mask.masked_fill(~causal, -math.inf))
        )
    if mask is not None:
        logits = logits.masked_fill(~mask, -math.inf) if mask.dtype == torch.bool else logits + mask
    attn = torch.softmax(logits, dim=-1) * (keep / (1 - dropout_p)).to(logits.dtype)
    return attn @ v


def _per_seed(op):
    """A vmap rule that runs `op` on each seed's slice of its batched arguments and stacks the outputs."""
    from torch._C._functorch import _add_batch_dim, _unwrap_batched, maybe_get_level
    from torch.utils._pytree import tree_flatten, tree_unflatten

    def rule(*args):
        leaves, spec = tree_flatten(args)
        level = max(maybe_get_level(x) for x in leaves if isinstance(x, torch.Tensor))
        slices: dict[int, tuple[torch.Tensor, ...]] = {}
        for i, x in enumerate(leaves):
            if isinstance(x, torch.Tensor) and maybe_get_level(x) == level:
                value, dim = _unwrap_batched(x, level)
                if dim is None:
                    leaves[i] = value
                else:
                    slices[i] = value.unbind(dim)  # one op: its backward is one stack, not a zero-filled copy per seed
        if not slices:  # nothing batched at this level
            return op(*tree_unflatten(leaves, spec))
        seeds = len(next(iter(slices.values())))
        outs = [
            op(*tree_unflatten([slices[i][k] if i in slices else x for i, x in enumerate(leaves)], spec))
            for k in range(seeds)
        ]
        return tuple(_add_batch_dim(torch.stack(parts), 0, level) for parts in zip(*outs))

    return rule


class _Dropout(nn.Module):
    """nn.Dropout as torch computes it on a CPU (input times a Bernoulli(1 - p) mask scaled by 1 / (1 - p)),
    its mask drawn as uniform numbers below 1 - p: under vmap one draw for every seed, which costs a CPU about
    half of what vmap's bernoulli_ does. Put in place of nn.Dropout in the ensemble's (stateless) copy of the
    model."""

    def __init__(self, p: float):
        super().__init__()
        self.p = p

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not self.training or self.p == 0:
            return x
        keep = torch.rand_like(x) < 1 - self.p  # (in-place ops here would leave vmap's batching rules)
        return x * (keep.to(x.dtype) / (1 - self.p))


def _swap_dropout(model: nn.Module) -> None:
    for name, child in model.named_children():
        if type(child) is nn.Dropout and not child.inplace:
            setattr(model, name, _Dropout(child.p))
        else:
            _swap_dropout(child)


def _no_weight_flattening(model: nn.Module) -> None:
    """nn.LSTM and nn.GRU re-pack their weights into one cuDNN buffer whenever they change, reading each weight's
    data pointer; the stateless copy's weights are vmap's stacked tensors, which have none ("Cannot access data
    pointer of Tensor that doesn't have storage" on a GPU; a CPU never packs). Each seed's slice reaches the fused
    kernel unpacked instead (`_per_seed`), which copies it, as it does for any RNN whose weights are not packed."""
    for module in model.modules():
        if isinstance(module, nn.RNNBase):
            module.flatten_parameters = lambda: None


def _check(models: list[nn.Module], recipes: list[Recipe], workdirs: list[Path], precision: str) -> None:
    if not models or not len(models) == len(recipes) == len(workdirs):
        raise ReproError("an ensemble needs one model, recipe and workdir per seed")
    seeds = [r.seed for r in recipes]
    if len(set(seeds)) < len(seeds):
        raise ReproError(f"an ensemble's seeds must differ, got {seeds}")
    if any(r.replace(seed=recipes[0].seed) != recipes[0] for r in recipes):
        raise ReproError("an ensemble's recipes may differ only in their seed")
    if precision == "fp16":
        raise ReproError("seeds trained together run in fp32 or bf16, not fp16 (its loss scaling is per model)")
    if recipes[0].accumulate != 1:
        raise ReproError(
            f"seeds trained together take each step's batch in one pass (recipe.accumulate=1, not "
            f"{recipes[0].accumulate}); train the seeds one at a time to accumulate"
        )
    if dist_utils.init_from_env().distributed:
        raise ReproError("seeds trained together run in one process, not under torchrun")


def _param_groups(model: nn.Module, params: dict[str, torch.Tensor]) -> list[torch.Tensor] | list[dict[str, Any]]:
    """The stacked parameters as the optimiser takes them: a model with `lr_groups()` (parts trained at a multiple of
    the schedule's rate) gets the same groups, in the same order, as its lone run, so that a seed's optimiser state
    is the one `fit` saves and resumes."""
    if not hasattr(model, "lr_groups"):
        return list(params.values())
    names = {id(p): name for name, p in model.named_parameters()}
    return [{**group, "params": [params[names[id(p)]] for p in group["params"]]} for group in model.lr_groups()]


def _stack(batches: list[dict[str, Any]]) -> dict[str, Any]:
    """Each seed's batch along a new leading dimension (non-tensor entries: the first seed's)."""
    return {
        k: torch.stack([b[k] for b in batches]) if isinstance(v, torch.Tensor) else v for k, v in batches[0].items()
    }


def _stacked_batches(dataset: Dataset, recipes: list[Recipe], samplers, epoch: int, first: int, collate_fn):
    """An epoch's batches of every seed, each seed's its lone run's (a function of its seed and the epoch), stacked
    along a new leading dimension: from a split held as ready tensors one gather of the [seeds, batch] indices
    (`repro.train.ready`), else each seed's batch from its own DataLoader, stacked."""
    size = recipes[0].batch_size
    orders = []
    for sampler in samplers:
        sampler.set_epoch(epoch)
        order = list(iter(sampler))
        orders.append([order[i : i + size] for i in range(first * size, len(order), size)])
    if isinstance(dataset, ReadyTensors) and collate_fn is None:
        return (dataset.batch(list(per_seed)) for per_seed in zip(*orders))
    loaders = [
        DataLoader(
            dataset,
            batch_sampler=batches,
            collate_fn=collate_fn,
            generator=torch.Generator().manual_seed(r.seed + epoch),
        )
        for r, batches in zip(recipes, orders)
    ]
    return (_stack(list(per_seed)) for per_seed in zip(*loaders))


def _clip_per_seed(params: list[torch.Tensor], max_norm: float) -> None:
    """`clip_grad_norm_` for each seed: the L2 norm of seed k's gradients scales seed k's alone."""
    grads = [p.grad for p in params if p.grad is not None]
    if not grads:
        return
    norms = torch.stack([g.pow(2).reshape(g.shape[0], -1).sum(1) for g in grads]).sum(0).sqrt()  # [seeds]
    coef = (max_norm / (norms + 1e-6)).clamp(max=1.0)
    for g in grads:
        g.mul_(coef.view(-1, *[1] * (g.dim() - 1)))


def _seed_optimizer_state(optimizer: torch.optim.Optimizer, k: int, seeds: int) -> dict[str, Any]:
    """Seed k's slice of the stacked optimiser's state: what `fit` saves for a lone run."""
    full = optimizer.state_dict()
    state = {
        i: {
            name: v[k].clone() if isinstance(v, torch.Tensor) and v.dim() > 0 and v.shape[0] == seeds else v
            for name, v in s.items()
        }
        for i, s in full["state"].items()
    }
    return {"state": state, "param_groups": full["param_groups"]}


def _stacked_optimizer_state(states: list[dict[str, Any]]) -> dict[str, Any]:
    """The inverse: seeds' optimiser states (from their checkpoints) stacked into one."""
    stacked = {}
    for i, first in states[0]["state"].items():
        stacked[i] = {
            name: torch.stack([s["state"][i][name] for s in states]) if v.dim() > 0 else v.clone()
            for name, v in first.items()
        }
    return {"state": stacked, "param_groups": states[0]["param_groups"]}


def fit_ensemble(
    models: list[nn.Module],
    train_dataset: Dataset,
    recipes: list[Recipe],
    workdirs: list[Path],
    *,
    resume: bool = False,
    device: str | torch.device | None = None,
    progress: bool = True,
    collate_fn: Callable | None = None,
    on_step: Callable[[int], None] | None = None,
    loss_step: LossStep | None = None,
    loggers: Iterable[str] | None = None,
) -> list[TrainState]:
    """Train `models[k]` on `train_dataset` by `recipes[k]` together; each ends with its trained weights and
    writes its checkpoint and logs to `workdirs[k]` (train.jsonl, and the experiment loggers `loggers`, default
    those REPRO_LOGGERS names, each seed its own). Returns one TrainState per seed."""
    from torch.func import functional_call, stack_module_state, vmap

    workdirs = [Path(w) for w in workdirs]
    recipe, seeds = recipes[0], len(models)
    env = dist_utils.DistEnv()
    dev = dist_utils.device_for(env, device)
    precision = resolve_precision(recipe.precision, dev, models[0])
    _check(models, recipes, workdirs, precision)
    if len(train_dataset) == 0:
        raise ReproError("the training set is empty")
    started = time.perf_counter()

    for model in models:
        model.to(dev)
    params, buffers = stack_module_state(models)
    frozen = {name for name, p in models[0].named_parameters() if not p.requires_grad}  # e.g. fixed word vectors
    params = {name: p.detach().requires_grad_(name not in frozen) for name, p in params.items()}
    base = copy.deepcopy(models[0]).to("meta")
    _swap_dropout(base)  # the seeds' dropout masks drawn at about half the cost (`_Dropout`)
    _no_weight_flattening(base)
    optimizer = build_optimizer(recipe, _param_groups(models[0], params))
    samplers = [dist_utils.sampler(train_dataset, env, seed=r.seed) for r in recipes]
    steps_per_epoch = math.ceil(len(samplers[0]) / recipe.batch_size)
    extra = {"global_batch": recipe.batch_size, "dataset_size": len(train_dataset), "world_size": 1}
    extra["recipe"] = recipe.name

    start_epoch, start_step_in_epoch, step, resumed_from = 0, 0, 0, None
    losses: list[float | None] = [None] * seeds
    paths = [w / ckpt.LAST for w in workdirs]
    if resume and all(p.exists() for p in paths):
        states = [ckpt.load_checkpoint(p, map_location=dev) for p in paths]
        positions = {(s["epoch"], s["step_in_epoch"], s["step"]) for s in states}
        saved = states[0]["extra"]
        sizes = (saved.get("global_batch"), saved.get("dataset_size"))
        if len(positions) > 1 or sizes != (recipe.batch_size, len(train_dataset)):
            raise ReproError(
                f"{workdirs[0].parent}: the seeds' checkpoints are not at one step of this recipe; start again "
                f"without --resume"
            )
        with torch.no_grad():
            for name, p in params.items():
                p.copy_(torch.stack([s["model"][name] for s in states]))
        optimizer.load_state_dict(_stacked_optimizer_state([s["optimizer"] for s in states]))
        ckpt.set_rng_state(ckpt.rank_rng_state(states[0], 0))
        start_epoch, start_step_in_epoch, step = positions.pop()
        resumed_from = {"epoch": start_epoch, "step": step}
        losses = [s["extra"].get("last_loss") for s in states]  # resumed after its last step: still its final loss
        for w in workdirs:
            _rewrite_log(w / LOG_NAME, step)
    else:
        torch.manual_seed(recipe.seed)  # the seeds' dropout masks, drawn together
        for w in workdirs:
            w.mkdir(parents=True, exist_ok=True)
            (w / LOG_NAME).write_text("", encoding="utf-8")

    loss_step = loss_step or recipe_loss_step(recipe.loss)

    def seed_loss(p, b, batch):
        return loss_step(lambda x: functional_call(base, (p, b), (x,)), batch)

    batched_loss = vmap(seed_loss, randomness="different")

    def save(epoch: int, step_in_epoch: int) -> None:
        for k, (model, path) in enumerate(zip(models, paths)):
            _unstack(model, params, buffers, k)
            state = _seed_optimizer_state(optimizer, k, seeds)
            ckpt.save_checkpoint(
                path,
                model=model,
                optimizer=SimpleNamespace(state_dict=lambda state=state: state),
                epoch=epoch,
                step=step,
                step_in_epoch=step_in_epoch,
                extra={**extra, "last_loss": losses[k]},
            )

    flag = _StopFlag()
    total_steps = steps_per_epoch * recipe.epochs
    logs: list[MetricLoggers] = []
    try:
        for r, w in zip(recipes, workdirs):
            resume_step = step if resumed_from else None
            logs.append(open_loggers(w, w / LOG_NAME, loggers, config=r.to_json(), resume_step=resume_step))
        with _batched_kernels(), matmul_precision(precision), _catch_signals(flag), _progress(progress) as bar:
            task = bar.add_task(
                f"{recipe.name} ×{seeds}", total=total_steps, completed=step, loss="–", lr="–", rate="–"
            )
            epoch = start_epoch
            for epoch in range(start_epoch, recipe.epochs):
                first = start_step_in_epoch if epoch == start_epoch else 0
                tick = time.perf_counter()
                for i, batch in enumerate(
                    _stacked_batches(train_dataset, recipes, samplers, epoch, first, collate_fn), start=first
                ):
                    lr = learning_rate(recipe.schedule, epoch, i, steps_per_epoch) * recipe.lr_factor
                    for group in optimizer.param_groups:
                        group["lr"] = lr * group.get("lr_scale", 1.0)
                    batch = to_device(batch, dev)
                    with _autocast(precision, dev):
                        loss = batched_loss(params, buffers, batch)  # [seeds]
                    optimizer.zero_grad(set_to_none=True)
                    loss.sum().backward()
                    if recipe.grad_clip is not None:
                        _clip_per_seed(list(params.values()), recipe.grad_clip)
                    optimizer.step()
                    step += 1
                    losses = [float(v) for v in loss.detach()]
                    now = time.perf_counter()
                    rate = recipe.batch_size / max(now - tick, 1e-9)
                    tick = now
                    for log, value in zip(logs, losses):
                        line = {"epoch": epoch + 1, "epochs": recipe.epochs, "step": step}
                        line |= {"steps": min(total_steps, recipe.max_steps or total_steps), "loss": value, "lr": lr}
                        line |= {"samples_per_s": round(rate, 3), "elapsed_s": round(now - started, 3)}
                        log.log_dict(line, step)
                    mean = sum(losses) / seeds
                    bar.update(task, advance=1, loss=f"{mean:.4g}", lr=f"{lr:.3g}", rate=f"{rate:.1f}")
                    if on_step is not None:
                        on_step(step)
                    if flag.signal is not None:
                        save(epoch, i + 1)
                        raise TrainingInterrupted(
                            f"training of {seeds} seeds interrupted by {signal.Signals(flag.signal).name} at epoch "
                            f"{epoch + 1}, step {step}; checkpoints saved to {workdirs[0].parent}; run again with "
                            f"--resume to continue"
                        )
                    if recipe.max_steps is not None and step >= recipe.max_steps:
                        break
                if recipe.max_steps is not None and step >= recipe.max_steps:
                    break
                save(epoch + 1, 0)
    finally:
        for log in logs:
            log.close()
    for k, model in enumerate(models):
        _unstack(model, params, buffers, k)

    out = []
    for k, (r, w) in enumerate(zip(recipes, workdirs)):
        state = TrainState(
            epochs_done=recipe.epochs if recipe.max_steps is None else epoch + 1,
            step=step,
            world_size=1,
            gpu_count=dist_utils.gpu_count(env, dev),
            global_batch=recipe.batch_size,
            per_device_batch=recipe.batch_size,
            device=str(dev) if dev.type == "cpu" else torch.cuda.get_device_name(dev),
            precision=precision,
            final_loss=losses[k],
            wall_time_s=round(time.perf_counter() - started, 3),
            samples_seen=step * recipe.batch_size,
            checkpoint=str(w / ckpt.LAST),
            log=str(w / LOG_NAME),
            resumed_from=resumed_from,
            recipe=r.to_json(),
        )
        write_json_atomic(w / STATE_NAME, state.to_json())
        out.append(state)
    return out


def _unstack(model: nn.Module, params: dict[str, torch.Tensor], buffers: dict[str, torch.Tensor], k: int) -> None:
    """Copy seed k's slice of the stacked parameters and buffers into its own model."""
    with torch.no_grad():
        for name, tensor in model.named_parameters():
            tensor.copy_(params[name][k])
        for name, tensor in model.named_buffers():
            if name in buffers:
                tensor.copy_(buffers[name][k])
