"""`python -m benchmarks`: run every benchmark with quick settings (each module has its full-size options)."""

from benchmarks import (
    bench_batch,
    bench_commands,
    bench_compile,
    bench_ensemble,
    bench_feature_store,
    bench_layernorm,
    bench_optimizer,
    bench_train,
    bench_vqa_eval,
)

if __name__ == "__main__":
    bench_commands.main(["--reps", "3"])
    bench_vqa_eval.main(["--n", "20000"])
    bench_feature_store.main(["--images", "1000"])
    bench_train.main(["--quick"])
    bench_ensemble.main(["--seeds", "2", "--steps", "20"])
    bench_layernorm.main(["--reps", "10", "--rounds", "3"])
    bench_optimizer.main(["--reps", "20", "--rounds", "3"])
    bench_compile.main(["--family", "dsganet", "--steps", "30"])
    bench_batch.main(["--family", "mcan-pa", "--steps", "20"])
