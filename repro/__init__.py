"""repro: a toolkit that reproduces every table of five papers on positional and spatial attention in
vision-language models (VQA on images, scene text and video; image-text retrieval, entailment, reasoning
and grounding).

Each table is a spec (`experiments/<paper>/<id>.yaml`) holding the numbers the paper printed; each paper
is a family of models and data (`repro.families`); `repro run` trains its rows on a shared engine
(`repro.train`) at the paper's scale or a small one, and `repro table` sets the reproduced numbers beside
the reported ones, with the paper's claims judged over seeds (`repro.report`).
"""

__version__ = "0.1.0"
