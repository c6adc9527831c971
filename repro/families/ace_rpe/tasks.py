"""ace-rpe's downstream runs after pre-training: VQA, SNLI-VE, NLVR2 (`heads.py`) and weakly supervised
grounding on RefCOCO+ (Grad-CAM, Table 5), each fine-tuned from the row's pre-trained weights and
scored per column split. At the generated scales the data comes from `synthetic_tasks.py`, read by the
same readers as ALBEF's files (`tasks_data.py`).

- VQA writes its test2015 predictions in the server's format (`repro submit vqa2-test-dev` checks
  them); at the generated scales the file is scored here as the server would, test-dev and test-std
  apart, from the generated answers;
- grounding (ALBEF `Grounding.py`, `--gradcam_mode itm`): the ITM positive logit is backpropagated to
  the cross-attention map of one fusion layer (ALBEF's `--block_num 8`, the third); the map times its
  clamped-positive gradient, averaged over heads and text tokens, is the heat map on the patch grid;
  bicubically resized to the image, it ranks the detector proposals (`metrics.grounding.select_boxes`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch.utils.data import DataLoader

from repro.families.ace_rpe.build import TASK_RECIPES, build_model
from repro.families.ace_rpe.columns import TASK_OF_DATASET
from repro.families.base import RunContext

K_TEST = 128  # ALBEF configs/VQA.yaml k_test
GRADCAM_LAYER = 2  # ALBEF --block_num 8: BERT layer 8, the third fusion layer
SPLIT_FILES = {"snli-ve": {"dev": "ve_dev", "test": "ve_test"}, "nlvr2": {"dev": "nlvr_dev", "test-p": "nlvr_test"}}


def _fit(ctx: RunContext, model, dataset, recipe_name: str, name: str, collate):
    """Fine-tune `model` on its task's loss, its forward (so DistributedDataParallel synchronises its gradients),
    on the unit's device."""
    from repro.families.ace_rpe.build import loss_step
    from repro.train import fit

    recipe = ctx.recipe(name=recipe_name, overrides=ctx.settings.get("task_recipe", {}))
    state = fit(
        model,
        dataset,
        recipe,
        ctx.workdir / name,
        loss_step=loss_step(model.task),
        collate_fn=collate,
        resume=ctx.resume,
        progress=ctx.progress,
        device=ctx.device,
    )
    return {"steps": state.step, "final_loss": state.final_loss}


def _loader(dataset, collate, batch_size: int = 32):
    return DataLoader(dataset, batch_size=batch_size, shuffle=False, collate_fn=collate)


def _on_model(model, batch: dict[str, Any]) -> dict[str, Any]:
    """The batch's tensors on the model's device (where `fit` trained it)."""
    from repro.train.distributed import model_device
    from repro.train.trainer import to_device

    return to_device(batch, model_device(model))


def _model(ctx: RunContext, task: str, sizes, weights):
    from repro.families.ace_rpe.heads import load_pretrained
    from repro.train.trainer import seed_everything

    seed_everything(ctx.seed)
    model = build_model(ctx.config, sizes, task=task)
    load_pretrained(model, weights)
    return model


@torch.no_grad()
def _accuracy(model, dataset, collate) -> float:
    model.eval()
    right = total = 0
    for batch in _loader(dataset, collate):
        right += int((model.logits(_on_model(model, batch)).argmax(1).cpu() == batch["label"]).sum())
        total += len(batch["label"])
    return 100.0 * right / total


def classify(ctx: RunContext, task: str, root: Path, pretrain_root: Path, weights, sizes, collate, size: int):
    """SNLI-VE or NLVR2 (after its text-assignment step): fine-tune, accuracy on each split."""
    from repro.families.ace_rpe.tasks_data import NLVRData, VEData

    reader = VEData if task == "snli-ve" else NLVRData
    training = {}
    model = _model(ctx, task, sizes, weights)
    if task == "nlvr2":  # ALBEF's text-assignment step on the pre-training pairs, then NLVR2 from its weights
        from repro.families.ace_rpe.data import Collate, PairDataset, read_annotations
        from repro.families.ace_rpe.heads import TaskALBEF

        assign = TaskALBEF(model.config, model.sizes, task, assign=True)
        assign.load_state_dict(model.state_dict(), strict=False)
        assign.vision_proj.load_state_dict(
            {"weight": weights["vision_proj.weight"], "bias": weights["vision_proj.bias"]}
        )
        pairs = PairDataset(read_annotations(pretrain_root / "pretrain.json", "pretrain"), pretrain_root, size)
        plain = Collate(collate.tok, collate.max_tokens)
        training["nlvr2_assign"] = _fit(ctx, assign, pairs, TASK_RECIPES["nlvr2-assign"], "nlvr2_assign", plain)
        model.load_state_dict({k: v for k, v in assign.state_dict().items() if k in model.state_dict()}, strict=False)
        model.copy_params()
        del assign
    prefix = "ve" if task == "snli-ve" else "nlvr"
    train = reader(root / f"{prefix}_train.json", root, size)
    training[task] = _fit(ctx, model, train, TASK_RECIPES[task], task, collate)
    scores = {
        split: _accuracy(model, reader(root / f"{name}.json", root, size), collate)
        for split, name in SPLIT_FILES[task].items()
    }
    return scores, training


def vqa(ctx: RunContext, root: Path, weights, sizes, collate, size: int, tok):
    """VQA: fine-tune the answer decoder, rank the answer list for every test2015 question, write the
    server's file; at the generated scales score it as the server does."""
    from repro.datasets import vqa_server
    from repro.datasets.vqa_server import PHASES
    from repro.families.ace_rpe.tasks_data import EOS, VQATest, VQATrain, read_answer_list, tokenize_answers

    model = _model(ctx, "vqa", sizes, weights)
    train = VQATrain(root / "vqa_train.json", root, size)
    training = {"vqa": _fit(ctx, model, train, TASK_RECIPES["vqa"], "vqa", collate)}
    answers = read_answer_list(root / "answer_list.json")
    answer_ids, answer_mask = tokenize_answers(tok, [a + EOS for a in answers])
    k = int(ctx.settings.get("k_test", {}).get("vqa2", K_TEST))
    model.eval()
    device = next(model.parameters()).device
    answer_ids, answer_mask = answer_ids.to(device), answer_mask.to(device)
    predicted: dict[int, str] = {}
    for batch in _loader(VQATest(root / "vqa_test.json", root, size), collate):
        picked = model.rank_answers(_on_model(model, batch), answer_ids, answer_mask, k=k)
        predicted.update({q: answers[i] for q, i in zip(batch["question_id"], picked.tolist())})
    out = ctx.predictions_file("test2015")
    questions = root / "vqa2" / "v2_OpenEnded_mscoco_test2015_questions.json"
    targets = vqa_server.TEST_FILES["vqa2"][("test", "test2015")]  # all of test2015, for either phase
    commands = {str(out): vqa_server.write_test_file(out, predicted, targets, questions)}
    writer = {  # which model wrote the file (the record keeps it next to the file's name)
        str(out): {
            "model": f"albef-{ctx.config.position_embedding}-vqa",
            "row": ctx.row.name,
            "seed": ctx.seed,
            "config": ctx.config.model_dump(mode="json", exclude_defaults=True),
            "checkpoint": str(ctx.workdir / "vqa"),
            "k_test": k,
        }
    }
    scores = {}
    gold_file = root / "vqa_test_answers.json"
    if gold_file.is_file():  # generated data: scored as the server scores test-dev and test-std
        from repro.families.ace_rpe.tasks_data import read_json_list

        gold = read_json_list(gold_file, {"question_id": int, "answer": list, "split": str})
        phases = {p: {g["question_id"]: predicted[g["question_id"]] for g in gold if g["split"] == p} for p in PHASES}
        annotations = {g["question_id"]: {"answers": [{"answer": a} for a in g["answer"]]} for g in gold}
        scores = {p: a["overall"] for p, a in vqa_server.server_scores(phases, annotations).items()}
    return scores, training, str(out), {"submit": commands, "vqa_model": writer}


def gradcam(model, batch, layer: int) -> torch.Tensor:
    """ALBEF's ITM Grad-CAM on fusion layer `layer`'s cross-attention: (B, grid, grid)."""
    ca = model.fusion.layer[layer].crossattention.self
    ca.save_attention = True
    try:
        with torch.enable_grad():
            image = model.image_embeds(batch["image"])
            text = model.text_embeds(batch["input_ids"], batch["attention_mask"])
            logits = model.itm_logits(text, batch["attention_mask"], image)
            model.zero_grad()
            logits[:, 1].sum().backward()
        cam, grad = ca.attention_map.detach(), ca.attention_map.grad.detach()
    finally:
        ca.save_attention = False
        ca.attention_map = None
    b, heads, n, m = cam.shape
    grid = int(round((m - 1) ** 0.5))
    mask = batch["attention_mask"].view(b, 1, n, 1, 1)
    cam = cam[..., 1:].reshape(b, heads, n, grid, grid) * mask
    grad = grad[..., 1:].clamp(min=0).reshape(b, heads, n, grid, grid) * mask
    return (cam * grad).mean(1).mean(1)


def score_heatmaps(grids, ref_ids, refer, dets):
    """ALBEF's `grounding_eval`: each patch-grid heat map resized (bicubic) to its image, the proposal
    it covers best picked, a hit when IoU with the gold box >= 0.5; per refer split."""
    from repro.metrics import grounding as metric

    heatmaps, proposals, gold, splits = [], [], [], []
    for ref_id, heat in zip(ref_ids, grids):
        split, box, image_id, (width, height) = refer.refs[ref_id]
        heat = F.interpolate(heat.cpu()[None, None], size=(int(height), int(width)), mode="bicubic")[0, 0]
        heatmaps.append(heat.numpy())
        proposals.append(dets.get(str(image_id), []))
        gold.append(box), splits.append(split)
    return metric.evaluate(gold, metric.select_boxes(heatmaps, proposals), splits=splits, ref_ids=list(ref_ids))


def grounding(ctx: RunContext, root: Path, weights, sizes, collate, size: int):
    """Weakly supervised grounding: ITC + ITM fine-tuning on expressions, then Grad-CAM box selection;
    the `grounding` metric on each refer split (val, testA, testB)."""
    from repro.families.ace_rpe.data import PairDataset, load_image, pre_caption
    from repro.families.ace_rpe.tasks_data import Refer, grounding_entries, read_dets
    from repro.train.trainer import seed_everything

    seed_everything(ctx.seed)
    model = build_model(ctx.config, sizes, task="retrieval")
    model.load_state_dict({k: v for k, v in weights.items() if k in model.state_dict()}, strict=False)
    train = [
        {"image": e["image"], "caption": e["text"], "image_id": e["image"].split("/")[-1]}
        for e in grounding_entries(root / "refcoco+_train.json")
    ]
    pairs = PairDataset(train, root, size)
    training = {"grounding": _fit(ctx, model, pairs, TASK_RECIPES["grounding"], "grounding", collate)}
    refer, dets = Refer(root / "refcoco+"), read_dets(root / "refcoco+" / "dets.json")
    layer = min(int(ctx.settings.get("gradcam_layer", GRADCAM_LAYER)), len(model.fusion.layer) - 1)
    model.eval()
    entries = grounding_entries(root / "refcoco+_val.json") + grounding_entries(root / "refcoco+_test.json")
    grids = []
    for start in range(0, len(entries), 32):
        chunk = entries[start : start + 32]
        items = [
            {"image": load_image(root / e["image"], size), "caption": pre_caption(e["text"]), "idx": 0} for e in chunk
        ]
        grids += list(gradcam(model, _on_model(model, collate(items)), layer).cpu())
    result = score_heatmaps(grids, [e["ref_id"] for e in entries], refer, dets)
    return {s: v for s, v in result.aggregate.items() if s != "overall"}, training


def run_tasks(
    ctx: RunContext, root: Path, pretrain_root: Path, weights: dict, sizes: dict, tok, size: int, max_tokens: int
) -> dict[str, Any]:
    """Every downstream column of the spec, from the row's pre-trained `weights`: {"metrics",
    "training", "extra", "predictions"}; `root` holds the tasks' files, `pretrain_root` the pre-training pairs."""
    from repro.families.ace_rpe.data import Collate
    from repro.families.ace_rpe.tasks_data import TaskCollate

    columns = ctx.spec.columns
    wanted = list(dict.fromkeys(TASK_OF_DATASET[c.dataset] for c in columns if c.dataset in TASK_OF_DATASET))
    if any(c.metric == "grounding" for c in columns):
        wanted.append("grounding")
    collate = TaskCollate(tok, max_tokens)
    out: dict[str, Any] = {"metrics": {}, "training": {}, "extra": {}, "predictions": []}
    for task in wanted:
        if task == "vqa":
            scores, training, file, extra = vqa(ctx, root, weights, sizes, collate, size, tok)
            out["predictions"].append(file)
            out["extra"].update(extra)
        elif task == "grounding":
            scores, training = grounding(ctx, root, weights, sizes, Collate(tok, max_tokens), size)
        else:
            scores, training = classify(ctx, task, root, pretrain_root, weights, sizes, collate, size)
        out["training"].update(training)
        for col in columns:
            mine = TASK_OF_DATASET.get(col.dataset or "") == task or (task == "grounding" and col.metric == "grounding")
            if mine and col.split in scores:
                out["metrics"][col.name] = float(scores[col.split])
    return out
