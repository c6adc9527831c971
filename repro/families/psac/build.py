"""psac's models: PSAC for one TGIF-QA task at the paper's sizes unless overridden, with what `repro model`
says about them (parameters by part against the official code's, paper-scale GPU-hours); the loss and
prediction steps of each task and its score.
"""

from __future__ import annotations

import functools
import json
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from repro.errors import ReproError
from repro.families import as_typed
from repro.families.base import DataNeed, ModelInfo
from repro.families.psac.config import PSACConfig, for_scale
from repro.specs import Spec

ARCHS = ("psac",)
TASKS = ("action", "transition", "frameqa", "count")
# Official vocabularies: FrameQA answers of the released code (data/cache/FrameQA_label2ans.pkl holds 1,746
# answers, built from Total_frameqa_question.csv); word tables are frozen GloVe and characters a small table.
PAPER_NUM_ANSWERS = {"frameqa": 1746}
PAPER_NUM_WORDS = 8000  # frozen, so it does not change the trainable count
PAPER_NUM_CHARS = 40  # a-z, 0-9 and specials; the table is left out of the comparison with the official count
# lixiangpengcs/PSAC: the official model's trainable parameters without the word/char tables, by part.
OFFICIAL_VIDEO_ENCODER = 19_514_416
OFFICIAL_QUESTION_PATH = 6_113_282  # question encoder, co-attention and pooling convolution
# The same per part, as `parts` names them (video_proj is the co-attention's weight-normed projection in the code).
OFFICIAL_PARTS = {
    "video_encoder": OFFICIAL_VIDEO_ENCODER,  # position table 36 x 300, its projection, one layer
    "question_encoder": 4_013_569,  # embedding (char convolution, 1x1 fusion, highway) and the encoder block
    "video_proj": 1_049_600,  # weight_norm(Linear(2048, 512)): v, g, bias
    "co_attention": 1_050_113,  # w4V, w4Q, w4mlu, bias and the 1x1 convolution 2048 -> 512 (W_f)
}


def official_parameters(task: str) -> int:
    """The released code's trainable parameters for one task, word and character tables excluded."""
    out = PAPER_NUM_ANSWERS.get(task, 1)
    classifier = (512 * 1024 + 1024) + (1024 * out + out) + 2  # weight-normed (dim=None) 512 -> 1024 -> out
    return OFFICIAL_VIDEO_ENCODER + OFFICIAL_QUESTION_PATH + classifier


# --- model --------------------------------------------------------------------------------------


def as_config(config: PSACConfig | dict) -> PSACConfig:
    return as_typed(config, (PSACConfig,))


def paper_sizes(config: PSACConfig | None = None) -> dict[str, Any]:
    """The model's sizes at the paper's settings, with the config's own size fields."""
    from repro.families.psac.model import PAPER_SIZES

    sizes = dict(PAPER_SIZES)
    if config is not None:
        sizes.update(
            frames=config.num_frames,
            heads=config.heads,
            word_dim=config.word_dim,
            char_dim=config.char_dim,
            max_chars=config.max_word_chars,
            max_words=config.max_question_words,
            ds_kernel=config.conv_kernel,
            hidden=config.hidden_size,
            dropout=config.dropout,
            bilstm_hidden=config.bilstm_hidden,
            video_dim=4096 if config.video_features == "c3d" else 2048,
        )
    return sizes


def network_of(config: PSACConfig | dict) -> PSACConfig:
    """The config with its network decided as at paper scale when unset (official); the runner decides it by the
    row's scale first (`config.for_scale`), so the generated scales build the paper's."""
    config = as_config(config)
    return for_scale(config, "paper") if config.network is None else config


def build_model(
    config: PSACConfig | dict,
    sizes: dict | None = None,
    *,
    task: str | None = None,
    num_words: int = PAPER_NUM_WORDS,
    num_chars: int = PAPER_NUM_CHARS,
    num_answers: int | None = None,
    word_vectors: torch.Tensor | None = None,
) -> nn.Module:
    """The PSAC model of one task (`task` or the config's) and network (unset: official, see `network_of`);
    `sizes` overrides the paper's sizes."""
    config = network_of(config)
    task = task or config.task or "action"
    if task not in TASKS:
        raise ReproError(f"unknown TGIF-QA task {task!r}; one of {', '.join(TASKS)}")
    full = paper_sizes(config)
    for key, value in (sizes or {}).items():
        if key not in full:
            raise ReproError(f"unknown psac model size {key!r}; known: {', '.join(sorted(full))}")
        full[key] = value
    for dim in ("video_dim", "hidden"):
        if full[dim] % full["heads"]:
            raise ReproError(f"psac size {dim}={full[dim]} is not divisible by heads={full['heads']}")
    if config.char_embedding and full["max_chars"] < full["char_kernel"]:
        raise ReproError(f"max_chars {full['max_chars']} is shorter than the character kernel {full['char_kernel']}")
    from repro.families.psac.model import PSAC

    if num_answers is None:
        num_answers = PAPER_NUM_ANSWERS.get(task, 1)
    return PSAC(
        task,
        full,
        video_encoder=config.video_encoder,
        vpsa_layers=config.vpsa_layers,
        char_embedding=config.char_embedding,
        co_attention=config.co_attention,
        num_words=num_words,
        num_chars=num_chars,
        num_answers=num_answers,
        word_vectors=word_vectors,
        network=config.network,
    )


def example_batch(
    batch_size: int = 1,
    sizes: dict[str, Any] | None = None,
    *,
    seed: int = 0,
    task: str = "action",
    num_words: int = PAPER_NUM_WORDS,
    num_chars: int = PAPER_NUM_CHARS,
    device: torch.device | str = "cpu",
) -> dict[str, torch.Tensor]:
    """A batch in the data interface's format: full-length questions and words."""
    s = paper_sizes()
    s.update(sizes or {})
    g = torch.Generator().manual_seed(seed)
    c = 5 if task in ("action", "transition") else 1
    batch = {
        "video": torch.randn(batch_size, s["frames"], s["video_dim"], generator=g),
        "words": torch.randint(2, num_words, (batch_size, c, s["max_words"]), generator=g),
        "chars": torch.randint(2, num_chars, (batch_size, c, s["max_words"], s["max_chars"]), generator=g),
        "question_id": torch.arange(batch_size),
    }
    return {k: v.to(device) for k, v in batch.items()}


def _trainable(module: nn.Module | None) -> int:
    return 0 if module is None else sum(p.numel() for p in module.parameters() if p.requires_grad)


def parts(model: nn.Module) -> list[tuple[str, int]]:
    """Trainable parameters by part; the character table apart (the official count leaves tables out)."""
    q = model.question_encoder
    char_table = _trainable(getattr(q, "char_emb", None))
    return [
        ("video_encoder", _trainable(model.video_encoder)),
        ("char_table", char_table),
        ("question_encoder", _trainable(q) - char_table),
        ("video_proj", _trainable(model.video_proj)),
        ("co_attention", _trainable(model.co_attention)),
        ("head", _trainable(model.head)),
    ]


def describe(config: PSACConfig | dict, spec: Spec | None = None) -> list[ModelInfo]:
    """One model per task at the paper's sizes and the official vocabularies (see PAPER_NUM_ANSWERS), of the
    network the paper scale builds (unset: official)."""
    config = network_of(config)
    tasks = (config.task,) if config.task else TASKS
    out = []
    for task in tasks:
        torch.manual_seed(0)
        model = build_model(config, task=task)
        total = sum(p.numel() for p in model.parameters())  # with the frozen word table
        out.append(
            ModelInfo(
                name=f"psac-{task} ({config.network} network)",
                task=task,
                trainable_params=_trainable(model),
                total_params=total,
                flops_per_sample=None,
                modules=parts(model),
            )
        )
    return out


# Epochs per task at paper scale, as the official code trains (MODELS.md §3: `main.py` 300 for Transition and
# Action, `main_count.py` and `main_frame.py` 100); the paper gives none, so the code is followed.
EPOCHS = {"action": 300, "transition": 300, "frameqa": 100, "count": 100}


# Table 4's training seconds per epoch on the paper's (unnamed) GPU, by network: PSAC (one VPSA block) and Bi-LSTM
EPOCH_SECONDS = {
    "vpsa": {"action": 269, "transition": 698, "frameqa": 122, "count": 74},
    "bilstm": {"action": 337, "transition": 870, "frameqa": 143, "count": 83},
}


def gpu_hours(config: PSACConfig | dict, precision: str | None = None) -> float | None:
    """Table 4's seconds per epoch times the official epochs (300 Action/Trans., 100 FrameQA/Count), all tasks (or
    the config's one), scaled by the row's forward FLOPs over those of Table 4's model of its kind (PSAC for VPSA
    stacks and rows without a video encoder, Bi-LSTM for Bi-LSTM rows): Table 3's six VPSA blocks cost about
    5x one block, its row without VPSA a fifth. The paper's time is at the paper's precision, whatever `precision`."""
    config = as_config(config)
    kind = "bilstm" if config.video_encoder == "bilstm" else "vpsa"
    anchor = as_config({"arch": "psac", "video_encoder": kind, "vpsa_layers": 1 if kind == "vpsa" else 0})
    same = anchor.model_dump(exclude={"task"}) == config.model_dump(exclude={"task"})
    tasks = (config.task,) if config.task else TASKS
    seconds = 0.0
    for task in tasks:
        ratio = 1.0 if same else _forward_flops(config, task) / _forward_flops(anchor, task)
        seconds += EPOCH_SECONDS[kind][task] * EPOCHS[task] * ratio
    return seconds / 3600


def _forward_flops(config: PSACConfig, task: str) -> float:
    """One forward pass's FLOPs at the paper's sizes for `task` (counted on the meta device: no memory)."""
    return _flops_of(config.model_copy(update={"task": task}).model_dump_json(exclude_defaults=True), task)


@functools.cache
def _flops_of(config_json: str, task: str) -> float:
    from repro.memory import on_meta
    from repro.nn.measure import count_flops

    with torch.device("meta"):
        model = build_model(as_config(json.loads(config_json)))
    return float(count_flops(model, on_meta(example_batch(1, task=task))))


# --- training and prediction steps ---------------------------------------------------------------


def loss_step(task: str):
    """The loss of one batch for a task: hinge (Action, Trans.), cross-entropy (FrameQA), MSE (Count)."""
    if task not in TASKS:
        raise ReproError(f"unknown TGIF-QA task {task!r}")

    def step(model: nn.Module, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        out = model(batch).float()
        target = batch["target"]
        if task in ("action", "transition"):
            return F.multi_margin_loss(out, target, margin=1.0)  # max(0, 1 - s_p + s_n), Sec. 3.5
        if task == "frameqa":
            return F.cross_entropy(out, target, ignore_index=-100)  # Eq. 16
        return F.mse_loss(out, target.float())  # Eq. 17

    return step


def predict_step(model: nn.Module, batch: dict[str, torch.Tensor]) -> torch.Tensor:
    """Candidate scores (B, 5), answer logits (B, A), or the raw count as (B, 1)."""
    out = model(batch)
    return out.unsqueeze(-1) if out.dim() == 1 else out


def score(task: str, outputs: torch.Tensor, targets: torch.Tensor) -> float:
    """Accuracy in % (Action, Trans., FrameQA) or the MSE of the clipped, rounded count."""
    from repro.families.psac.model import count_prediction

    if task == "count":
        return float(((count_prediction(outputs.view(-1)) - targets.float()) ** 2).mean())
    return float((outputs.argmax(dim=-1) == targets).float().mean() * 100)


def refuse_control_at_paper_scale(spec: Spec) -> None:
    """A positive control (`table: "Control: ..."`) asks a generated task built to need its mechanism: it has no
    paper scale."""
    if spec.table.startswith("Control"):
        raise ReproError(
            f"{spec.id} is a positive control of the synthetic scale (its task is generated): run --scale synthetic"
        )


def paper_data(spec: Spec, row) -> list[DataNeed]:
    """What a paper-scale row reads, in the order of its commands: the TGIF-QA question files, GloVe 6B (the frozen
    word table), then the PSAC authors' HDF5 frame features of the row's `video_features` (placed by hand: Google
    Drive), prepared into a frame store by `repro prepare tgif-qa`. A ReproError for a positive control."""
    refuse_control_at_paper_scale(spec)
    from repro.datasets.prepare import feature_store_dir
    from repro.datasets.tgif import SPLITS, TASKS, file_name, tgif_dir
    from repro.families.psac.data import glove_file

    def questions() -> bool:
        return all((tgif_dir() / file_name(s, t)).is_file() for s in SPLITS if s != "Total" for t in TASKS)

    config = as_config(row.config)
    store = feature_store_dir("tgif-qa") / f"{config.video_features}.store" / "meta.json"
    return [
        DataNeed("tgif-qa", ready=questions, splits=("train",)),
        DataNeed("glove-6b", ready=lambda: glove_file(config.word_dim) is not None),
        DataNeed("tgif-qa-features", "tgif-qa", store.is_file),
    ]
