"""`python -m benchmarks`: run every benchmark at its default size."""
import sys

from benchmarks import bench_vqa_eval

if __name__ == "__main__":
    sys.exit(bench_vqa_eval.main([]))
