"""Benchmark: `repro eval --metric vqa` against a per-question loop that works the way the official script does.

    python -m benchmarks.bench_vqa_eval            # VQA v2 val size: 214,354 questions x 10 answers
    python -m benchmarks.bench_vqa_eval --n 20000  # quicker

Both sides read the same generated files (official VQA layout) and score them; the baseline keeps
answers as dicts, re-normalises every answer of every question, and leaves one answer dict out at a
time, as `vqaEval.py` does. Prints the times, the ratio, and whether every per-question score is
identical (it exits 1 if not).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from repro.metrics import vqa
from repro.metrics.files import evaluate_data  # imported before timing, as the loop's modules are

VQA_V2_VAL = 214_354

_WORDS = (
    "yes no 2 1 3 white red blue black green brown 0 4 tennis frisbee dog cat man woman kitchen "
    "pizza skateboarding surfing baseball bat table left right nothing snow grass water wood"
).split()
_VARIANTS = ("{}", "{}.", "The {}", "a {}", "{}!", "{} ", "{}, {}", "{}-{}", "{}?")
_NUMBER_WORDS = ("two", "three", "one", "none", "ten")


def generate(n: int, seed: int = 0) -> tuple[dict, list]:
    """Annotations and predictions in the official VQA layout, with the spellings the rules act on."""
    rng = np.random.default_rng(seed)
    tail = [f"{_WORDS[i % len(_WORDS)]} {i}" for i in range(n // 2)]  # a long tail of rare answers
    annotations, results = [], []
    for q in range(n):
        kind = rng.random()
        core = _WORDS[rng.integers(len(_WORDS))]
        if kind < 0.35:  # all ten humans agree
            answers = [core] * 10
        else:
            pool = [
                core,
                tail[rng.integers(len(tail))],
                _NUMBER_WORDS[rng.integers(len(_NUMBER_WORDS))],
                _VARIANTS[rng.integers(len(_VARIANTS))].format(core, core),
            ]
            answers = [pool[k] for k in rng.integers(len(pool), size=10)]
        pick = rng.random()
        pred = (
            answers[rng.integers(10)]
            if pick < 0.6
            else (core.capitalize() if pick < 0.8 else tail[rng.integers(len(tail))])
        )
        annotations.append(
            {
                "question_id": q,
                "image_id": q // 3,
                "question_type": f"type {q % 65}",
                "answer_type": ("yes/no", "number", "other")[q % 3],
                "multiple_choice_answer": answers[0],
                "answers": [
                    {"answer": a, "answer_confidence": "yes", "answer_id": i + 1} for i, a in enumerate(answers)
                ],
            }
        )
        results.append({"question_id": q, "answer": pred})
    return {"annotations": annotations}, results


# --- the baseline: one question at a time, the official way -----------------------------------


def baseline(annotations: dict, results: list) -> dict:
    """Per-question scores as fractions, from a loop shaped like `vqaEval.evaluate` (2021 head)."""
    # the script's index and results loading (`VQA.createIndex`, `VQA.loadRes`)
    gts = {a["question_id"]: a for a in annotations["annotations"]}
    img_to_qa: dict = {}
    for ann in annotations["annotations"]:
        img_to_qa.setdefault(ann["image_id"], []).append(ann)
    assert {r["question_id"] for r in results} == set(gts), "results do not cover the annotation set"
    for r in results:
        qa = gts[r["question_id"]]
        r["image_id"], r["question_type"], r["answer_type"] = qa["image_id"], qa["question_type"], qa["answer_type"]
    res = {r["question_id"]: r for r in results}
    out = {}
    acc_qtype: dict = {}
    acc_atype: dict = {}
    eval_qa, eval_qtype, eval_atype = {}, {}, {}
    for qid in gts:
        for ans in gts[qid]["answers"]:
            ans["answer"] = ans["answer"].replace("\n", " ").replace("\t", " ").strip()
        pred = res[qid]["answer"].replace("\n", " ").replace("\t", " ").strip()
        if len({a["answer"] for a in gts[qid]["answers"]}) > 1:
            for ans in gts[qid]["answers"]:
                ans["answer"] = vqa.digits_and_articles(_official_punctuation(ans["answer"]))
            pred = vqa.digits_and_articles(_official_punctuation(pred))
        accs = []
        for held_out in gts[qid]["answers"]:
            others = [item for item in gts[qid]["answers"] if item != held_out]
            matching = [item for item in others if item["answer"] == pred]
            accs.append(min(1, float(len(matching)) / 3))
        avg = float(sum(accs)) / len(accs)
        out[qid] = avg
        # the script's per-question bookkeeping: per-type lists and rounded per-question records
        qtype, atype = gts[qid]["question_type"], gts[qid]["answer_type"]
        acc_qtype.setdefault(qtype, []).append(avg)
        acc_atype.setdefault(atype, []).append(avg)
        eval_qa[qid] = round(100 * avg, 2)
        eval_qtype.setdefault(qtype, {})[qid] = round(100 * avg, 2)
        eval_atype.setdefault(atype, {})[qid] = round(100 * avg, 2)
    return out


def _official_punctuation(text: str) -> str:
    """The punctuation rule as the script runs it: the digit-comma search repeated per character."""
    out = text
    for p in vqa.PUNCTUATION:
        if (p + " " in text or " " + p in text) or (vqa.DIGIT_COMMA_DIGIT.search(text) is not None):
            out = out.replace(p, "")
        else:
            out = out.replace(p, " ")
    return vqa.PERIOD.sub("", out, count=vqa.PERIOD_COUNT)


def ours(annotations: dict, results: list):
    """What `repro eval --metric vqa` does after parsing the two files."""
    return evaluate_data("vqa", annotations, results)


def timed(fn, *args):
    t0 = time.perf_counter()
    out = fn(*args)
    return out, time.perf_counter() - t0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=VQA_V2_VAL, help="questions to generate (default: VQA v2 val)")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        ann_file, res_file = Path(tmp) / "annotations.json", Path(tmp) / "results.json"
        annotations, results = generate(args.n)
        ann_file.write_text(json.dumps(annotations))
        res_file.write_text(json.dumps(results))
        del annotations, results
        (ann_a, res_a), t_parse = timed(lambda: (json.loads(ann_file.read_text()), json.loads(res_file.read_text())))
        ann_b, res_b = json.loads(ann_file.read_text()), json.loads(res_file.read_text())
        result, t_ours = timed(ours, ann_a, res_a)
        reference, t_base = timed(baseline, ann_b, res_b)
    same = all(result.per_item[q] == 100 * s for q, s in reference.items()) and len(reference) == result.n
    overall_ref = 100 * float(sum(reference.values())) / len(reference)
    print(f"questions: {args.n:,} x 10 answers")
    print(f"parsing the two JSON files (same for both): {t_parse:8.2f} s")
    print(f"official-style loop:                        {t_base:8.2f} s   overall {overall_ref!r}")
    print(f"repro eval (vqa), after parsing:            {t_ours:8.2f} s   overall {result.aggregate['overall']!r}")
    print(f"ratio, scoring:             {t_base / t_ours:6.1f}x")
    print(f"ratio, including parsing:   {(t_base + t_parse) / (t_ours + t_parse):6.1f}x")
    print(f"per-question scores identical: {same}; overall identical: {overall_ref == result.aggregate['overall']}")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
