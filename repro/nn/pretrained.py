"""BERT weights from a local folder (`transformers`' `from_pretrained`), checked instead of reported.

`from_pretrained` initialises at random every tensor the model needs that the folder lacks, and goes on after a
table of every tensor name it placed, missed or left unused. Here a missing or misshapen tensor is one `ReproError`
line naming the folder, and the file's unused tensors (pre-training heads, the layers above those a model keeps)
are one log line. A folder without a weights file (a tokenizer only) gives None: the model keeps its own start.
"""

from __future__ import annotations

import logging
from pathlib import Path

from repro.errors import ReproError

log = logging.getLogger(__name__)


WEIGHT_FILES = ("pytorch_model.bin", "model.safetensors")


def bert_from_folder(model_class, folder: Path, **kwargs):
    """`model_class.from_pretrained(folder, **kwargs)`, every tensor of the model read from the folder; None when
    the folder holds no weights file."""
    from transformers.utils import logging as transformers_logging

    if not any((Path(folder) / name).is_file() for name in WEIGHT_FILES):
        return None
    before = transformers_logging.get_verbosity()
    transformers_logging.set_verbosity_error()  # the per-tensor load report; what it says is checked below
    try:
        model, info = model_class.from_pretrained(str(folder), output_loading_info=True, **kwargs)
    finally:
        transformers_logging.set_verbosity(before)
    for kind, what in (("missing_keys", "lack"), ("mismatched_keys", "have other shapes for")):
        keys = sorted(str(k) for k in info.get(kind) or ())
        if keys:
            raise ReproError(
                f"{folder}: the BERT weights {what} {len(keys)} tensor(s) of {model_class.__name__} (e.g. {keys[0]}); "
                f"is it bert-base-uncased?"
            )
    unused = info.get("unexpected_keys") or ()
    log.info("%s from %s: %d tensors in the file not used by it", model_class.__name__, folder, len(unused))
    return model
