"""`python -m benchmarks`: run every benchmark with its quick settings."""
from benchmarks import bench_train

if __name__ == "__main__":
    bench_train.main(["--quick"])
