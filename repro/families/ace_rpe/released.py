"""ALBEF's released fine-tuned checkpoints evaluated, no training (`repro run ID --rows ROW --weights released`).

Table 3's ALBEF rows: per retrieval data set of the spec's columns its checkpoint (ALBEF's `flickr30k.pth`,
`mscoco.pth`, or the user's `--weights flickr30k=FILE`), in the network its shapes define
(`keymap.sizes_from_state`; the heads are ALBEF's 12), loaded by the key map (the strict load: nothing of ours may
stay initial; the key report printed), then ALBEF's retrieval evaluation on the test split (`retrieval.py`: ITC
for all pairs, the top k of each query re-scored by ITM, k = 128 Flickr30K, 256 COCO), the recalls by
`repro.metrics.retrieval`. A data set no checkpoint covers is not evaluated: its columns stay empty.
"""

from __future__ import annotations

from repro.errors import ReproError
from repro.families.ace_rpe.build import K_TEST, as_config, build_model, paper_sizes
from repro.families.ace_rpe.columns import column_dataset, recall_datasets
from repro.families.base import RowRun, RunContext
from repro.specs import Spec

# ALBEF's retrieval test splits (Karpathy): images and captions, what an evaluation encodes and re-scores
TEST_SPLITS = {"flickr30k": (1_000, 5_000), "coco-retrieval": (5_000, 25_000)}


def run_weights(ctx: RunContext) -> RowRun:
    """Each retrieval data set of the spec evaluated from its checkpoint in `ctx.weights` (a WeightsSource)."""
    from repro.families.ace_rpe.data import RetrievalTest, tokenizer
    from repro.families.ace_rpe.keymap import load_albef, read_checkpoint, sizes_from_state
    from repro.families.ace_rpe.retrieval import score_matrices
    from repro.families.ace_rpe.sources import paper_sources, read_split, synthetic_sources
    from repro.families.ace_rpe.synthetic import RETRIEVAL_NAMES
    from repro.metrics import retrieval
    from repro.train.distributed import DistEnv, device_for
    from repro.weights import render_report

    config = as_config(ctx.config)
    if config.position_embedding != "none":
        raise ReproError(
            f"row {ctx.row.name!r}: ALBEF's released layout is ALBEF without a cross-modal position embedding; "
            f"this row's {config.position_embedding} would stay untrained"
        )
    datasets = recall_datasets(ctx.spec)
    if not datasets:
        raise ReproError(
            f"{ctx.spec.id}: no retrieval columns; ALBEF's released VQA, SNLI-VE and NLVR2 heads are not read"
        )
    data = ctx.data or {}
    if ctx.scale == "paper":
        sources = paper_sources(config, datasets)
        vocab = sources.vocab
    else:
        sources = synthetic_sources(data["root"], datasets)
        vocab = data.get("tasks", data["root"]) / "vocab"
    tok = tokenizer(vocab)
    settings = ctx.settings
    max_tokens = int(settings.get("max_tokens", 30))  # ALBEF's Retrieval.py: max_length 30 at test
    heads = int(settings.get("sizes", {}).get("heads", config.heads))
    metrics: dict[str, float] = {}
    run = RowRun(metrics=metrics, split="test" if ctx.scale == "paper" else "test (generated)")
    run.info["weights_keys"] = {}
    for dataset in datasets:
        checkpoint = ctx.weights.for_part(dataset)
        if checkpoint is None:
            continue  # the plan said so: its columns stay empty
        name = RETRIEVAL_NAMES[dataset]
        state = read_checkpoint(checkpoint.path)
        sizes = sizes_from_state(state, heads)
        if sizes["vocab_size"] != len(tok):
            raise ReproError(
                f"{checkpoint.path}: a vocabulary of {sizes['vocab_size']} words, the data's ({vocab}) {len(tok)}"
            )
        sizes |= {key: getattr(tok, key) for key in ("pad_token_id", "cls_token_id", "sep_token_id", "mask_token_id")}
        model = build_model(config, sizes, task="retrieval")
        report = load_albef(model, state, lambda key: False, source=str(checkpoint.path))
        render_report(report, show_placed=False)
        run.info["weights_keys"][name] = report.counts()
        model.to(device_for(DistEnv())).eval()
        _, test_json, image_root = sources.retrieval[dataset]
        test = RetrievalTest(read_split(test_json, "test", image_root, ctx.limit), image_root)
        k = int(settings.get("k_test", {}).get(dataset, K_TEST[dataset]))
        i2t, t2i = score_matrices(model, test, tok, sizes["image_size"], k, max_tokens=max_tokens)
        result = retrieval.evaluate(i2t, t2i, test.img2txt, test.txt2img)
        run.extra[f"{name}_r_mean"] = result.aggregate["r_mean"]
        for column in ctx.spec.columns:
            if column.metric == "recall" and column_dataset(ctx.spec, column) == dataset:
                metrics[column.name] = float(result.aggregate[column.key.replace("@mean", "_mean")])
        del model
    return run


def evaluation_hours(config, spec: Spec) -> float | None:
    """`repro run --weights`: GPU-hours of ALBEF's retrieval evaluation on each test split of the spec's recall
    columns at ALBEF's sizes (384 px): every image and caption encoded once, then the fusion and ITM head on the
    top k of each image and each caption (`cost.py`'s FLOPs per pass)."""
    from repro.families.ace_rpe import cost

    datasets = [d for d in recall_datasets(spec) if d in TEST_SPLITS]
    if not datasets:
        return None
    passes = cost.pass_flops(paper_sizes(as_config(config)), 384)
    flops = 0.0
    for dataset in datasets:
        images, texts = TEST_SPLITS[dataset]
        flops += (
            images * passes["image"] + texts * passes["text"] + (images + texts) * K_TEST[dataset] * passes["fusion"]
        )
    return cost.gpu_hours(flops)
