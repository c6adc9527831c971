"""ace-rpe's downstream runs after pre-training: VQA, SNLI-VE, NLVR2 (`heads.py`) and weakly supervised
grounding on RefCOCO+ (Grad-CAM, Table 5), each fine-tuned from the row's pre-trained weights and
scored per column split. At the generated scales the data comes from `synthetic_tasks.py`; at paper
scale from ALBEF's json files and the images of each data set (`sources.paper_task_files`); the same
readers take both (`tasks_data.py`).

As ALBEF's task scripts (salesforce/ALBEF `VQA.py`, `VE.py`, `NLVR.py`, `Pretrain_nlvr.py`, `Grounding.py`):

- VQA trains on vqa_train, vqa_val and vg_qa (the recipe's `train_splits`), ALBEF's training
  augmentations at paper scale; it ranks ALBEF's answer list for every test2015 question (the top
  k = 128 by first-token probability re-ranked) and writes them in the server's format (`repro submit
  vqa2-test-dev`, `vqa2-test-std` check them); at the generated scales the file is scored here as the
  server would, test-dev and test-std apart, from the generated answers. val is scored (VQA accuracy)
  only where the recipe leaves it out of training (ALBEF trains on it);
- SNLI-VE and NLVR2: accuracy on dev and test (NLVR2's test-P); NLVR2 after ALBEF's text-assignment
  step on the 4M pre-training pairs (256 px at paper scale, as ALBEF's NLVR_pretrain.yaml);
- grounding (ALBEF `Grounding.py`, `--gradcam_mode itm`): the ITM positive logit is backpropagated to
  the cross-attention map of one fusion layer (ALBEF's `--block_num 8`, the third); the map times its
  clamped-positive gradient, averaged over heads and text tokens, is the heat map on the patch grid;
  bicubically resized to the image, it ranks the detector proposals (`metrics.grounding.select_boxes`).

The evaluation of one head is a plain function of a model, its data and a device (`evaluate_vqa`,
`evaluate_accuracy`; their data from `vqa_eval_data`, `classify_eval_data`), so a model from elsewhere
(ALBEF's released vqa.pth, snli_ve.pth, nlvr.pth) is scored by the same code.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset

from repro.errors import ReproError
from repro.families.ace_rpe.build import TASK_RECIPES, build_model
from repro.families.ace_rpe.columns import TASK_OF_DATASET, spec_heads
from repro.families.ace_rpe.sources import TASK_FILES, TaskFiles, check_first_image, generated_task_files
from repro.families.base import RunContext

K_TEST = 128  # ALBEF configs/VQA.yaml k_test
GRADCAM_LAYER = 2  # ALBEF --block_num 8: BERT layer 8, the third fusion layer
SPLIT_FILES = {"snli-ve": {"dev": "ve_dev", "test": "ve_test"}, "nlvr2": {"dev": "nlvr_dev", "test-p": "nlvr_test"}}
EVAL_BATCH = {"vqa": 16, "snli-ve": 64, "nlvr2": 16, "grounding": 32}  # ALBEF's test batch per GPU (paper scale)
GENERATED_EVAL_BATCH = 32
VQA_TRAIN_FILES = {"train": "vqa_train.json", "val": "vqa_val.json", "vg": "vg_qa.json"}  # ALBEF's train_file
CROP_SCALE = 0.5  # ALBEF's fine-tuning RandomResizedCrop scale (0.5, 1)


def _files(root: Path | TaskFiles, pretrain_root: Path | None = None) -> TaskFiles:
    """A generated folder (the tasks' files, `synthetic_tasks.py`) or the paper-scale files as they are."""
    return root if isinstance(root, TaskFiles) else generated_task_files(root, pretrain_root)


def _fit(
    ctxs: list[RunContext], models, dataset, recipe: str, name: str, collate, together: bool = True, key="task_recipe"
):
    """Fine-tune each seed's model on its task's loss (`stages.train_stage`: several seeds together where
    `together`), on the units' device, by its recipe under the scale's overrides `key`; per seed {"steps",
    "final_loss"} (and "ensemble")."""
    from repro.families.ace_rpe.stages import train_stage

    recipes = [c.recipe(name=recipe, overrides=recipe_overrides(c.settings, key)) for c in ctxs]
    done = train_stage(ctxs, models, dataset, recipes, name, collate, together)
    return [{k: v for k, v in d.items() if k != "world_size"} for d in done]


def recipe_overrides(settings, key: str) -> dict:
    """A scale's recipe overrides: `task_recipe` for every fine-tuning; `assign_recipe` for NLVR2's text-assignment
    step where the scale gives one (else `task_recipe`, so that a task schedule of many epochs need not also run the
    assignment step, one epoch in ALBEF, for as many)."""
    if key == "assign_recipe" and key not in settings:
        key = "task_recipe"
    return settings.get(key, {})


def _loader(dataset, collate, batch_size: int = GENERATED_EVAL_BATCH, workers: int = 0, model=None):
    """Evaluation batches in order; pinned for a model on a GPU."""
    from repro.train.distributed import model_device

    pin = model is not None and model_device(model).type == "cuda"
    return DataLoader(
        dataset, batch_size=batch_size, shuffle=False, collate_fn=collate, num_workers=workers, pin_memory=pin
    )


def _eval_workers(files: TaskFiles, task: str) -> int:
    """Loader processes of a head's evaluation: its recipe's `num_workers` at paper scale (images decoded from
    disk), none on the generated files."""
    from repro.families import load_recipe

    return load_recipe(TASK_RECIPES[task]).num_workers if files.paper else 0


def _share(items, batch_size: int):
    """This rank's share of an evaluation split under torchrun (whole batches, `distributed.shard_of_batches`:
    the ranks' shares in order cover it once), or all of it in one process; and the job's DistEnv."""
    from torch.utils.data import Subset

    from repro.train import distributed

    env = distributed.current()
    if not env.distributed:
        return items, env
    return Subset(items, distributed.shard_of_batches(len(items), batch_size, env)), env


def _on_model(model, batch: dict[str, Any]) -> dict[str, Any]:
    """The batch's tensors on the model's device (where `fit` trained it)."""
    from repro.train.distributed import model_device
    from repro.train.trainer import to_device

    return to_device(batch, model_device(model))


def _placed(model, device):
    """The model on `device` (None: where it is), in evaluation mode."""
    if device is not None:
        model.to(torch.device(device))
    return model.eval()


def task_models(ctxs: list[RunContext], task: str, sizes, weights: list) -> list:
    """Each seed's `task` model, built after seeding with its seed, from its own pre-trained weights."""
    from repro.families.ace_rpe.heads import load_pretrained
    from repro.train.trainer import seed_everything

    out = []
    for ctx, own in zip(ctxs, weights):
        seed_everything(ctx.seed)
        model = build_model(ctx.config, sizes, task=task)
        load_pretrained(model, own)
        out.append(model)
    return out


def _first_images(files: TaskFiles, pairs) -> None:
    """At paper scale, the first image of each json file before any training (`(json, image path)` pairs)."""
    if files.paper:
        for path, image in pairs:
            check_first_image(Path(path), Path(image))


# --- the evaluation of one head: (model, data, device) -> metrics / predictions ---------------------


@dataclass
class ClassifyEval:
    """What scoring SNLI-VE or NLVR2 on a split takes: its items (`VEData`, `NLVRData`) and their batches."""

    items: Dataset
    collate: Any
    batch_size: int = GENERATED_EVAL_BATCH
    workers: int = 0  # loader processes


@dataclass
class VQAEval:
    """What answering a VQA split takes: its questions (`VQATest`), their batches, ALBEF's answer list and k."""

    questions: Any
    collate: Any
    answers: list[str]
    k: int = K_TEST
    batch_size: int = GENERATED_EVAL_BATCH
    workers: int = 0  # loader processes


@torch.no_grad()
def evaluate_accuracy(model, data: ClassifyEval, device: str | torch.device | None = None) -> float:
    """ALBEF's SNLI-VE / NLVR2 evaluation: the argmax of the head's logits against the labels, in percent; the
    batches on the model's device (`device`: moved there first)."""
    from repro.train.distributed import gather_objects

    model = _placed(model, device)
    items, env = _share(data.items, data.batch_size)
    right = total = 0
    for batch in _loader(items, data.collate, data.batch_size, data.workers, model):
        right += int((model.logits(_on_model(model, batch)).argmax(1).cpu() == batch["label"]).sum())
        total += len(batch["label"])
    counts = gather_objects((right, total), env)  # under torchrun: every rank's share
    return 100.0 * sum(r for r, _ in counts) / sum(t for _, t in counts)


@torch.no_grad()
def evaluate_vqa(model, data: VQAEval, device: str | torch.device | None = None) -> dict[str, Any]:
    """ALBEF's VQA evaluation: per question the answer of the list ranked first (`TaskALBEF.rank_answers`, k);
    {"predictions": {question_id: answer}, "scores": VQA accuracy (`overall`, per answer type) where the
    questions carry their annotators' answers (val), else {}}; the batches on the model's device."""
    from repro.families.ace_rpe.tasks_data import EOS, tokenize_answers
    from repro.train.distributed import gather_objects, model_device

    model = _placed(model, device)
    answer_ids, answer_mask = tokenize_answers(data.collate.tok, [a + EOS for a in data.answers])
    where = model_device(model)
    answer_ids, answer_mask = answer_ids.to(where), answer_mask.to(where)
    questions, env = _share(data.questions, data.batch_size)
    mine: list[tuple[Any, str]] = []
    for batch in _loader(questions, data.collate, data.batch_size, data.workers, model):
        picked = model.rank_answers(_on_model(model, batch), answer_ids, answer_mask, k=data.k)
        mine += [(q, data.answers[i]) for q, i in zip(batch["question_id"], picked.cpu().tolist())]
    predicted: dict[Any, str] = {q: a for share in gather_objects(mine, env) for q, a in share}  # in the split's order
    scores: dict[str, float] = {}
    gold = getattr(data.questions, "gold", None)
    if gold:
        from repro.metrics import vqa as vqa_metric

        ids = list(predicted)
        result = vqa_metric.evaluate([gold[q] for q in ids], [predicted[q] for q in ids], ids)
        scores = {k: float(v) for k, v in result.aggregate.items() if isinstance(v, (int, float))}
    return {"predictions": predicted, "scores": scores}


def classify_eval_data(files: TaskFiles, task: str, split: str, tok, size: int, max_tokens: int = 30) -> ClassifyEval:
    """SNLI-VE's (`dev`, `test`) or NLVR2's (`dev`, `test-p`) split of `files`, ALBEF's test transform."""
    from repro.families.ace_rpe.tasks_data import NLVRData, TaskCollate, VEData

    reader = VEData if task == "snli-ve" else NLVRData
    root = files.images[task]
    items = reader(files.json[f"{SPLIT_FILES[task][split]}.json"], root, size, limit=files.limit)
    _first_images(files, [(files.json[f"{SPLIT_FILES[task][split]}.json"], items.image_path(items.entries[0]))])
    batch = EVAL_BATCH[task] if files.paper else GENERATED_EVAL_BATCH
    return ClassifyEval(items, TaskCollate(tok, max_tokens), batch, _eval_workers(files, task))


def vqa_eval_data(files: TaskFiles, split: str, tok, size: int, max_tokens: int = 30, k: int = K_TEST) -> VQAEval:
    """VQA v2's `test` (every test2015 question, for both server phases: the server's question file at paper
    scale, the generated vqa_test.json otherwise) or `val` (vqa_val.json, with its answers) of `files`."""
    from repro.families.ace_rpe.tasks_data import TaskCollate, VQATest, read_answer_list, test2015_entries

    root = files.images["vqa"]
    if split == "test" and files.paper:
        questions = VQATest(None, root, size, entries=test2015_entries(files.questions), limit=files.limit)
        source = files.questions
    else:
        source = files.json["vqa_test.json" if split == "test" else "vqa_val.json"]
        questions = VQATest(source, root, size, limit=files.limit)
    _first_images(files, [(source, root / questions.entries[0]["image"])])
    answers = read_answer_list(files.json["answer_list.json"])
    batch = EVAL_BATCH["vqa"] if files.paper else GENERATED_EVAL_BATCH
    return VQAEval(questions, TaskCollate(tok, max_tokens), answers, k, batch, _eval_workers(files, "vqa"))


# --- the heads' runs ---------------------------------------------------------------------------------


def train_data(files: TaskFiles, task: str, size: int, vqa_files: list[Path] | None = None):
    """The task's training items: ALBEF's train_file (VQA: `vqa_files`, its train_file list; vqa_train.json by
    default) under the task's image root(s), randomly cropped as ALBEF's fine-tuning does at paper scale."""
    from repro.families.ace_rpe.tasks_data import NLVRData, VEData, VQATrain

    crop = CROP_SCALE if files.paper else None
    if task == "vqa":
        roots = {"vqa": files.images["vqa"], "vg": files.images["vg"]}
        return VQATrain(vqa_files or [files.json[TASK_FILES["vqa"][0]]], roots, size, crop, limit=files.limit)
    reader = VEData if task == "snli-ve" else NLVRData
    return reader(files.json[TASK_FILES[task][0]], files.images[task], size, crop, limit=files.limit)


def classify(
    ctxs: list[RunContext],
    task: str,
    root,
    pretrain_root: Path,
    weights: list,
    sizes,
    collate,
    size: int,
    assign_size: int | None = None,
):
    """SNLI-VE or NLVR2 (after its text-assignment step, at `assign_size` px where given): fine-tune, accuracy
    on each split; per seed (scores, training)."""
    files = _files(root, pretrain_root)
    train = train_data(files, task, size)
    _first_images(files, [(files.json[TASK_FILES[task][0]], train.image_path(train.entries[0]))])
    evals = {
        split: classify_eval_data(files, task, split, collate.tok, size, collate.max_tokens)
        for split in SPLIT_FILES[task]
    }
    training: list[dict[str, Any]] = [{} for _ in ctxs]
    models = task_models(ctxs, task, sizes, weights)
    if task == "nlvr2":  # ALBEF's text-assignment step on the pre-training pairs (one seed at a time), then NLVR2
        for ctx, model, own, done in zip(ctxs, models, weights, training):
            done["nlvr2_assign"] = text_assignment(ctx, model, files, own, collate, assign_size or size)
    for done, stage in zip(training, _fit(ctxs, models, train, TASK_RECIPES[task], task, collate)):
        done[task] = stage
    scores = [{split: evaluate_accuracy(model, data) for split, data in evals.items()} for model in models]
    return list(zip(scores, training))


def text_assignment(ctx: RunContext, model, files: TaskFiles, weights, collate, size: int) -> dict[str, Any]:
    """ALBEF's NLVR2 text-assignment pre-training (`Pretrain_nlvr.py`) of `model`'s encoders and paired fusion
    layers on the pre-training pairs at `size` px, its weights then loaded back into `model` (resized)."""
    from repro.families.ace_rpe.data import Collate, PairDataset, read_annotations
    from repro.families.ace_rpe.heads import TaskALBEF, load_pretrained, load_resized

    same = size == model.sizes["image_size"]
    assign = TaskALBEF(model.config, {**model.sizes, "image_size": size}, "nlvr2", assign=True)
    if same:
        assign.load_state_dict(model.state_dict(), strict=False)
    else:
        load_pretrained(assign, weights)
    assign.vision_proj.load_state_dict({"weight": weights["vision_proj.weight"], "bias": weights["vision_proj.bias"]})
    parts = []
    for path, image_root in files.assign:
        entries = read_annotations(path, "pretrain")[: files.limit]
        _first_images(files, [(path, Path(image_root) / entries[0]["image"])])
        parts.append(PairDataset(entries, image_root, size, crop_scale=0.2 if files.paper else None))
    pairs = parts[0] if len(parts) == 1 else torch.utils.data.ConcatDataset(parts)
    plain = Collate(collate.tok, collate.max_tokens)
    done = _fit([ctx], [assign], pairs, TASK_RECIPES["nlvr2-assign"], "nlvr2_assign", plain, key="assign_recipe")[0]
    if same:
        model.load_state_dict({k: v for k, v in assign.state_dict().items() if k in model.state_dict()}, strict=False)
    else:
        load_resized(model, assign.state_dict())
    model.copy_params()
    return done


def vqa(ctxs: list[RunContext], root, weights: list, sizes, collate, size: int, tok):
    """VQA: fine-tune the answer decoder (one seed at a time: `stages.py`), rank the answer list for every test2015
    question, write the server's file; at the generated scales score it as the server does; val where it is not
    trained on. Per seed (scores, training, predictions file, extra)."""
    ctx = ctxs[0]
    files = _files(root)
    splits = ["train"]  # the generated files: vqa_train.json alone
    if files.paper:
        splits = list(ctx.recipe(name=TASK_RECIPES["vqa"], overrides=ctx.settings.get("task_recipe", {})).train_splits)
    unknown = [s for s in splits if s not in VQA_TRAIN_FILES]
    if unknown:
        raise ReproError(f"VQA trains on {', '.join(VQA_TRAIN_FILES)} (ALBEF's files), not {', '.join(unknown)}")
    train_files = [files.json[VQA_TRAIN_FILES[s]] for s in splits]
    train = train_data(files, "vqa", size, train_files)
    _first_images(files, [(path, train.image_path(entry)) for path, entry in train.firsts])
    k = int(ctx.settings.get("k_test", {}).get("vqa2", K_TEST))
    test = vqa_eval_data(files, "test", tok, size, collate.max_tokens, k)
    held_out = files.paper and "val" not in splits
    val = vqa_eval_data(files, "val", tok, size, collate.max_tokens, k) if held_out else None
    models = task_models(ctxs, "vqa", sizes, weights)
    done = _fit(ctxs, models, train, TASK_RECIPES["vqa"], "vqa", collate, together=False)
    out = []
    for c, model, training in zip(ctxs, models, done):
        scores, file, extra = _vqa_scores(c, model, files, test, val, k)
        if files.paper:  # ALBEF's train_file
            extra["vqa_train_files"] = [p.name for p in train_files]
        out.append((scores, {"vqa": training}, file, extra))
    return out


def _vqa_scores(ctx: RunContext, model, files: TaskFiles, test: VQAEval, val: VQAEval | None, k: int):
    """One seed's VQA model: its answers written for the server (and scored as the server would at the generated
    scales), val scored where held out; (scores, predictions file, extra)."""
    from repro.datasets import vqa_server
    from repro.datasets.vqa_server import PHASES

    predicted = evaluate_vqa(model, test)["predictions"]
    out = ctx.predictions_file("test2015")
    targets = vqa_server.TEST_FILES["vqa2"][("test", "test2015")]  # all of test2015, for either phase
    commands = {str(out): vqa_server.write_test_file(out, predicted, targets, None if files.paper else files.questions)}
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
    extra: dict[str, Any] = {"submit": commands, "vqa_model": writer}
    if val is not None:
        extra["vqa2_val"] = evaluate_vqa(model, val)["scores"]
    scores = {}
    gold_file = files.json["vqa_test_answers.json"] if "vqa_test_answers.json" in files.json else None
    if gold_file is not None and gold_file.is_file():  # generated data: scored as the server scores both phases
        from repro.families.ace_rpe.tasks_data import read_json_list

        gold = read_json_list(gold_file, {"question_id": int, "answer": list, "split": str})
        phases = {p: {g["question_id"]: predicted[g["question_id"]] for g in gold if g["split"] == p} for p in PHASES}
        annotations = {g["question_id"]: {"answers": [{"answer": a} for a in g["answer"]]} for g in gold}
        scores = {p: a["overall"] for p, a in vqa_server.server_scores(phases, annotations).items()}
    return scores, str(out), extra


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


def grounding(ctxs: list[RunContext], root, weights: list, sizes, collate, size: int):
    """Weakly supervised grounding: ITC + ITM fine-tuning on expressions (the seeds together), then Grad-CAM box
    selection; per seed (the `grounding` metric on each refer split (val, testA, testB), training)."""
    from repro.families.ace_rpe.data import PairDataset
    from repro.families.ace_rpe.heads import load_resized
    from repro.families.ace_rpe.tasks_data import Refer, grounding_entries, read_dets
    from repro.train.trainer import seed_everything

    files = _files(root)
    image_root = files.images["grounding"]
    train_json = files.json["refcoco+_train.json"]
    expressions = grounding_entries(train_json)[: files.limit]
    tests = [grounding_entries(files.json[f"refcoco+_{s}.json"])[: files.limit] for s in ("val", "test")]
    _first_images(files, [(train_json, image_root / expressions[0]["image"])])
    refer, dets = Refer(files.refer), read_dets(files.json["refcoco+/dets.json"])
    models = []
    for ctx, own in zip(ctxs, weights):
        seed_everything(ctx.seed)
        model = build_model(ctx.config, sizes, task="retrieval")
        if files.paper:  # pre-trained at 256 px: the resolution-dependent tables resized
            load_resized(model, own)
        else:
            model.load_state_dict({k: v for k, v in own.items() if k in model.state_dict()}, strict=False)
        models.append(model)
    train = [{"image": e["image"], "caption": e["text"], "image_id": e["image"].split("/")[-1]} for e in expressions]
    pairs = PairDataset(train, image_root, size, crop_scale=1.0 if files.paper else None)  # ALBEF: resize, no crop
    done = _fit(ctxs, models, pairs, TASK_RECIPES["grounding"], "grounding", collate)
    entries = tests[0] + tests[1]
    out = []
    for ctx, model, training in zip(ctxs, models, done):
        layer = min(int(ctx.settings.get("gradcam_layer", GRADCAM_LAYER)), len(model.fusion.layer) - 1)
        grids = _heatmaps(model, entries, image_root, size, collate, layer, files.paper)
        result = score_heatmaps(grids, [e["ref_id"] for e in entries], refer, dets)
        out.append(({s: v for s, v in result.aggregate.items() if s != "overall"}, {"grounding": training}))
    return out


def _heatmaps(model, entries, image_root: Path, size: int, collate, layer: int, paper: bool) -> list[torch.Tensor]:
    """Each expression's Grad-CAM grid (`gradcam`), in batches; under torchrun each rank computes its share of the
    expressions (whole batches) and every rank gets all of them, in order."""
    from repro.families.ace_rpe.data import load_image, pre_caption
    from repro.train.distributed import gather_objects

    model.eval()
    step = EVAL_BATCH["grounding"] if paper else GENERATED_EVAL_BATCH
    share, env = _share(entries, step)  # under torchrun: this rank's expressions, whole batches
    grids = []
    for start in range(0, len(share), step):
        chunk = [share[i] for i in range(start, min(start + step, len(share)))]
        items = [
            {"image": load_image(image_root / e["image"], size), "caption": pre_caption(e["text"]), "idx": 0}
            for e in chunk
        ]
        grids += list(gradcam(model, _on_model(model, collate(items)), layer).cpu())
    return [grid for part in gather_objects(grids, env) for grid in part]


def run_tasks(
    ctxs: list[RunContext],
    root,
    pretrain_root: Path | None,
    weights: list[dict],
    sizes: dict,
    tok,
    size: int,
    max_tokens: int,
    assign_size: int | None = None,
) -> list[dict[str, Any]]:
    """Every downstream column of the spec, for each seed from its pre-trained `weights[k]`: per seed {"metrics",
    "training", "extra", "predictions"}; `root` holds the tasks' files (a generated folder, whose pre-training
    pairs are under `pretrain_root`, or the paper-scale `TaskFiles`)."""
    from repro.families.ace_rpe.data import Collate
    from repro.families.ace_rpe.tasks_data import TaskCollate

    spec = ctxs[0].spec
    files = _files(root, pretrain_root)
    collate = TaskCollate(tok, max_tokens)
    out: list[dict[str, Any]] = [{"metrics": {}, "training": {}, "extra": {}, "predictions": []} for _ in ctxs]
    for task in spec_heads(spec):
        if task == "vqa":
            for got, (scores, training, file, extra) in zip(out, vqa(ctxs, files, weights, sizes, collate, size, tok)):
                got["predictions"].append(file)
                got["extra"].update(extra)
                got["training"].update(training)
                got["scores"] = scores
        else:
            if task == "grounding":
                results = grounding(ctxs, files, weights, sizes, Collate(tok, max_tokens), size)
            else:
                results = classify(ctxs, task, files, pretrain_root, weights, sizes, collate, size, assign_size)
            for got, (scores, training) in zip(out, results):
                got["training"].update(training)
                got["scores"] = scores
        for got in out:
            scores = got.pop("scores")
            for col in spec.columns:
                mine = TASK_OF_DATASET.get(col.dataset or "") == task
                mine = mine or (task == "grounding" and col.metric == "grounding")
                if mine and col.split in scores:
                    got["metrics"][col.name] = float(scores[col.split])
    return out
