"""Benchmarks: scripts that print speed as ratios against a baseline measured in the same run."""
