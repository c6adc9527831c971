"""repro: reproduce the tables of five papers on positional and spatial attention in VQA models."""

__version__ = "0.1.0"
