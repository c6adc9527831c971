"""`repro attention` for mcan-pa: where a trained MCAN row looks among an image's boxes, on a question of the
generated val split (the unit's `last.pt`, the data its run prepared: `RunContext.data`)."""

from __future__ import annotations

import json

import torch

from repro.datasets.vqa_scoring import read_annotations
from repro.errors import ReproError
from repro.families.base import AttentionMaps, RunContext
from repro.families.mcan_pa import build
from repro.families.mcan_pa.config import McanConfig


def attention(ctx: RunContext, question_id: int) -> AttentionMaps:
    """One val question of a generated scale through the unit's trained model (`ctx.workdir/last.pt`).

    Maps over the image's boxes: `decoder self-attention` (Eq. 12, POA's place): per decoder layer and
    head, the attention each box receives from the other boxes (mean over the querying boxes);
    `image pooling` (Eq. 1): the weight of each box in the image's attention-based pooling.
    """
    import numpy as np
    from torch.utils.data import default_collate

    from repro.data.store import FeatureStore
    from repro.datasets.vqa_dataset import VQADataset
    from repro.nn.inspect import record_attention
    from repro.train.checkpoint import load_checkpoint
    from repro.train.distributed import device_for, init_from_env
    from repro.train.trainer import to_device

    if not ctx.generated:
        raise ReproError("attention maps are drawn at the smoke and synthetic scales (generated scenes)")
    data = ctx.data
    if not isinstance(data, dict) or "val_features" not in data:
        raise ReproError(f"{ctx.spec.id} at scale {ctx.scale}: attention maps are drawn on the synthetic scenes")
    if not isinstance(build.as_config(ctx.config), McanConfig):
        raise ReproError(f"row {ctx.row.name!r}: attention maps are drawn for MCAN rows")
    val = VQADataset(data["prepared"], "val", FeatureStore.open(data["val_features"]))
    where = np.nonzero(np.asarray(val.question_ids) == question_id)[0]
    if len(where) == 0:
        some = ", ".join(str(int(q)) for q in val.question_ids[:5])
        raise ReproError(f"no val question {question_id} at scale {ctx.scale}; val questions are e.g. {some}")
    checkpoint = ctx.workdir / "last.pt"
    if not checkpoint.is_file():
        raise ReproError(
            f"{checkpoint}: no trained model; train it first with `repro train {ctx.spec.id} --row "
            f"'{ctx.row.name}' --scale {ctx.scale} --seed {ctx.seed}`"
        )
    model = build.build_model(ctx.config, val.num_tokens, val.num_answers, sizes=ctx.settings.get("sizes"))
    try:
        model.load_state_dict(load_checkpoint(checkpoint)["model"])
    except RuntimeError as exc:
        raise ReproError(f"{checkpoint} does not fit this row's model: {str(exc).splitlines()[0]}") from None
    device = device_for(init_from_env(device=ctx.device), ctx.device)  # the one rule that picks a unit's device
    model.to(device).eval()
    item = val[int(where[0])]
    batch = to_device(default_collate([item]), device)
    pooled: dict[str, torch.Tensor] = {}

    def pooling(module, args, output) -> None:  # Eq. 1's softmax over the image's boxes
        x, mask = args
        pooled["weights"] = torch.softmax(module.mlp(x).masked_fill(mask[..., None], -1e9), dim=1)[..., 0].detach()

    handle = model.flat_img.register_forward_hook(pooling)
    with torch.no_grad(), record_attention(model) as maps:
        logits = model(batch)
    handle.remove()
    n = int(item["box_count"])
    boxes = item["boxes"][:n].numpy()  # the dataset's item: on the CPU (only `batch` moved)
    layers = len(model.decoder)
    received = np.stack(
        [maps[f"decoder.{i}.self_att"][0, :, :n, :n].mean(dim=1).cpu().numpy() for i in range(layers)]
    )  # [layers, heads, n]
    questions = json.loads(data["val_questions"].read_text())["questions"]
    asked = next((q for q in questions if q["question_id"] == question_id), {})
    question = asked.get("question", "?")
    gold = read_annotations(data["val_annotations"]).get(question_id, {}).get("multiple_choice_answer")
    return AttentionMaps(
        question=question,
        answer=val.answer_vocab[int(logits.argmax(dim=1))],
        gold=gold,
        image_size=tuple(float(v) for v in item["image_size"]),
        boxes=boxes,
        box_labels=box_labels(ctx.settings, asked.get("image_id"), boxes),
        over_boxes={
            "decoder self-attention": received,
            "image pooling": pooled["weights"][0, :n].cpu().numpy()[None, None, :],
        },
        raw={name.replace(".", "_"): m[0].cpu().numpy() for name, m in maps.items()}
        | {"image_pooling": pooled["weights"][0].cpu().numpy()},
    )


def box_labels(settings: dict, image_id: int | None, boxes) -> list[str]:
    """`#k colour class` per box: the generator, replayed, knows each region's object; `#k` alone when its
    replayed boxes are not these (a data folder made by another generator)."""
    import numpy as np

    from repro.families.mcan_pa.synthetic import GeneratorConfig, scene_objects

    plain = [f"#{k + 1}" for k in range(len(boxes))]
    try:
        objects = scene_objects(GeneratorConfig.from_mapping(settings.get("generator")), int(image_id))
    except (KeyError, TypeError, ValueError):
        return plain
    drawn = np.asarray([o.box for o in objects], dtype=np.float32)
    if drawn.shape != np.shape(boxes) or not np.allclose(drawn, boxes, atol=0.5):
        return plain
    return [f"{label} {o.name}" for label, o in zip(plain, objects)]
