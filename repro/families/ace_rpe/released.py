"""ALBEF's released fine-tuned checkpoints evaluated, no training (`repro run ID --rows ROW --weights released`).

Per data set of the spec's columns, its checkpoint: Table 3's Flickr30K and MS-COCO from ALBEF's `flickr30k.pth`
and `mscoco.pth`, Table 4's VQA v2 from `vqa.pth` (ALBEF released no fine-tuned SNLI-VE or NLVR2 checkpoint), or
the user's `--weights DATASET=FILE`. Each is built as the network its shapes define (`keymap.sizes_from_state`;
the head count is the row's), loaded by the key map (the strict load: nothing of ours may stay initial; the key
report printed), then evaluated as a trained row is: retrieval by `retrieval.py` on the test split (ITC for all
pairs, the top k of each query re-scored by ITM, k = 128 Flickr30K, 256 COCO); VQA by `tasks.evaluate_vqa` on
every test2015 question (k = 128), written for `repro submit` (generated data: scored as the server scores it);
SNLI-VE by `tasks.evaluate_accuracy` on dev and test. A data set no checkpoint covers is not evaluated: its
columns stay empty.
"""

from __future__ import annotations

from typing import Any

from repro.errors import ReproError
from repro.families.ace_rpe.build import K_TEST, as_config, build_model, paper_sizes
from repro.families.ace_rpe.columns import TASK_OF_DATASET, column_dataset, recall_datasets
from repro.families.base import RowRun, RunContext
from repro.specs import Spec

# ALBEF's retrieval test splits (Karpathy): images and captions, what an evaluation encodes and re-scores
TEST_SPLITS = {"flickr30k": (1_000, 5_000), "coco-retrieval": (5_000, 25_000)}
VQA_TEST_QUESTIONS = 447_793  # VQA v2 test2015: every question is answered (test-dev is a subset)
ANSWER_TOKENS = 5  # an answer of ALBEF's list with its [CLS] and [SEP], as the decoder reads it
READ_HEADS = ("vqa", "snli-ve")  # the downstream heads a checkpoint is evaluated for here


def run_weights(ctx: RunContext) -> RowRun:
    """Each data set of the spec that `ctx.weights` (a WeightsSource) has a checkpoint for, evaluated from it."""
    from repro.families.ace_rpe.data import tokenizer
    from repro.families.ace_rpe.sources import paper_sources

    config = as_config(ctx.config)
    if config.position_embedding != "none":
        raise ReproError(
            f"row {ctx.row.name!r}: ALBEF's released layout is ALBEF without a cross-modal position embedding; "
            f"this row's {config.position_embedding} would stay untrained"
        )
    covered = [c.dataset for c in ctx.spec.columns if c.dataset and ctx.weights.for_part(c.dataset) is not None]
    recall = [d for d in recall_datasets(ctx.spec) if ctx.weights.for_part(d) is not None]
    heads = list(dict.fromkeys(TASK_OF_DATASET[d] for d in covered if d in TASK_OF_DATASET))
    unread = [h for h in heads if h not in READ_HEADS]
    if unread:
        raise ReproError(
            f"{ctx.spec.id}: a {', '.join(unread)} checkpoint is not read here (ALBEF released none fine-tuned); "
            f"the heads read are {', '.join(READ_HEADS)} and retrieval"
        )
    data = ctx.data or {}
    if ctx.scale == "paper":
        vocab = paper_sources(config, recall).vocab
    else:
        from repro.families.ace_rpe.sources import run_vocabulary

        vocab = run_vocabulary(data)
    tok = tokenizer(vocab)
    run = RowRun(metrics={}, split="test" if ctx.scale == "paper" else "test (generated)")
    run.info["weights_keys"] = {}
    for dataset in recall:
        _retrieval(ctx, dataset, tok, run)
    for head in heads:
        _downstream(ctx, head, tok, run)
    return run


def _load(ctx: RunContext, part: str, task: str, tok):
    """The checkpoint of `part` in the network its shapes define for `task`, loaded strictly (its key report
    printed and kept), on the unit's device in eval mode; (model, sizes)."""
    from repro.families.ace_rpe.keymap import load_albef, read_checkpoint, sizes_from_state
    from repro.train.distributed import DistEnv, device_for
    from repro.weights import render_report

    checkpoint = ctx.weights.for_part(part)
    state = read_checkpoint(checkpoint.path)
    heads = int(ctx.settings.get("sizes", {}).get("heads", as_config(ctx.config).heads))
    sizes = sizes_from_state(state, heads, task)
    if sizes["vocab_size"] != len(tok):
        raise ReproError(f"{checkpoint.path}: a vocabulary of {sizes['vocab_size']} words, the data's {len(tok)}")
    sizes |= {key: getattr(tok, key) for key in ("pad_token_id", "cls_token_id", "sep_token_id", "mask_token_id")}
    model = build_model(ctx.config, sizes, task=task)
    report = load_albef(model, state, lambda key: False, source=str(checkpoint.path))
    render_report(report, show_placed=False)
    return model.to(device_for(DistEnv())).eval(), sizes, report.counts()


def _retrieval(ctx: RunContext, dataset: str, tok, run: RowRun) -> None:
    """ALBEF's retrieval evaluation of `dataset`'s test split; the recall columns of that data set."""
    from repro.families.ace_rpe.data import RetrievalTest
    from repro.families.ace_rpe.retrieval import score_matrices
    from repro.families.ace_rpe.sources import paper_sources, read_split, synthetic_sources
    from repro.families.ace_rpe.synthetic import RETRIEVAL_NAMES
    from repro.metrics import retrieval

    name = RETRIEVAL_NAMES[dataset]
    if ctx.scale == "paper":
        sources = paper_sources(as_config(ctx.config), [dataset])
    else:
        sources = synthetic_sources((ctx.data or {})["root"], [dataset])
    model, sizes, run.info["weights_keys"][name] = _load(ctx, dataset, "retrieval", tok)
    _, test_json, image_root = sources.retrieval[dataset]
    test = RetrievalTest(read_split(test_json, "test", image_root, ctx.limit), image_root)
    k = int(ctx.settings.get("k_test", {}).get(dataset, K_TEST[dataset]))
    max_tokens = int(ctx.settings.get("max_tokens", 30))  # ALBEF's Retrieval.py: max_length 30 at test
    i2t, t2i = score_matrices(model, test, tok, sizes["image_size"], k, max_tokens=max_tokens)
    result = retrieval.evaluate(i2t, t2i, test.img2txt, test.txt2img)
    run.extra[f"{name}_r_mean"] = result.aggregate["r_mean"]
    for column in ctx.spec.columns:
        if column.metric == "recall" and column_dataset(ctx.spec, column) == dataset:
            run.metrics[column.name] = float(result.aggregate[column.key.replace("@mean", "_mean")])


def _downstream(ctx: RunContext, head: str, tok, run: RowRun) -> None:
    """A VQA or SNLI-VE checkpoint evaluated as `tasks.py` evaluates the row's own fine-tuned head."""
    from repro.families.ace_rpe.sources import generated_task_files, paper_task_files
    from repro.families.ace_rpe.tasks import classify_eval_data, evaluate_accuracy, evaluate_vqa, vqa_eval_data

    part = next(d for d, h in TASK_OF_DATASET.items() if h == head)
    if ctx.scale == "paper":
        files = paper_task_files([head], ctx.limit)
    else:
        files = generated_task_files((ctx.data or {})["tasks"], (ctx.data or {})["root"])
    model, sizes, run.info["weights_keys"][head] = _load(ctx, part, head, tok)
    size, max_tokens = sizes["image_size"], int(ctx.settings.get("max_tokens", 30))
    if head == "vqa":
        k = int(ctx.settings.get("k_test", {}).get(part, 128))  # ALBEF's configs/VQA.yaml k_test
        predicted = evaluate_vqa(model, vqa_eval_data(files, "test", tok, size, max_tokens, k))["predictions"]
        scores = _vqa_file(ctx, files, predicted, run)
    else:
        scores = {
            split: evaluate_accuracy(model, classify_eval_data(files, head, split, tok, size, max_tokens))
            for split in ("dev", "test")
        }
    for column in ctx.spec.columns:
        if column.dataset == part and column.split in scores:
            run.metrics[column.name] = float(scores[column.split])


def _vqa_file(ctx: RunContext, files, predicted: dict[Any, str], run: RowRun) -> dict[str, float]:
    """The test2015 answers written in the server's format with their `repro submit` commands; on generated data
    (its answers known) the two phases scored as the server scores them."""
    from repro.datasets import vqa_server
    from repro.families.ace_rpe.tasks_data import read_json_list

    out = ctx.predictions_file("test2015")
    targets = vqa_server.TEST_FILES["vqa2"][("test", "test2015")]
    run.extra["submit"] = {
        str(out): vqa_server.write_test_file(out, predicted, targets, None if files.paper else files.questions)
    }
    run.predictions.append(str(out))
    gold_file = files.json.get("vqa_test_answers.json")
    if files.paper or gold_file is None or not gold_file.is_file():
        return {}  # at paper scale only the server scores test-dev and test-std
    gold = read_json_list(gold_file, {"question_id": int, "answer": list, "split": str})
    phases = {
        p: {g["question_id"]: predicted[g["question_id"]] for g in gold if g["split"] == p} for p in vqa_server.PHASES
    }
    annotations = {g["question_id"]: {"answers": [{"answer": a} for a in g["answer"]]} for g in gold}
    return {p: a["overall"] for p, a in vqa_server.server_scores(phases, annotations).items()}


def evaluation_hours(config, spec: Spec) -> float | None:
    """`repro run --weights`: GPU-hours of evaluating the spec's retrieval and VQA columns at ALBEF's sizes
    (384 px; `cost.py`'s FLOPs per pass): retrieval encodes every test image and caption once, then the fusion and
    ITM head on the top k of each; VQA encodes every test2015 question once and runs the 6-layer answer decoder on
    k = 128 candidate answers. SNLI-VE's and NLVR2's are left out (ALBEF released no such checkpoint)."""
    from repro.families.ace_rpe import cost

    sizes = paper_sizes(as_config(config))
    passes = cost.pass_flops(sizes, 384)
    flops = 0.0
    for dataset in recall_datasets(spec):
        images, texts = TEST_SPLITS[dataset]
        encode = images * passes["image"] + texts * passes["text"]
        flops += encode + (images + texts) * K_TEST[dataset] * passes["fusion"]
    if any(c.dataset == "vqa2" for c in spec.columns):
        decoder = cost.fusion_flops(sizes["fusion_layers"], ANSWER_TOKENS, cost.TEXT_TOKENS, sizes["hidden_size"])
        per_question = passes["image"] + passes["text"] + passes["fusion"] + 128 * decoder
        flops += VQA_TEST_QUESTIONS * per_question
    return cost.gpu_hours(flops) if flops else None
