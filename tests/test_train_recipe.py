"""Recipes and schedules: the paper's MCAN+PA schedule, validation with file:line errors."""

import pytest

from repro.errors import ReproError
from repro.families import load_recipe
from repro.train.schedule import epoch_rates, mcan_lr


def test_mcan_pa_recipe_is_the_papers_schedule():
    r = load_recipe("mcan-pa/vqa2")
    assert r.epochs == 13 and r.batch_size == 64 and r.loss == "bce-sum" and r.grad_clip is None
    assert r.optimizer["name"] == "adam" and r.optimizer["betas"] == [0.9, 0.98]
    expected = [2.5e-5, 5e-5, 7.5e-5] + [1e-4] * 7 + [2e-5, 2e-5, 4e-6]  # §IV-B
    assert epoch_rates(r.schedule, r.epochs) == pytest.approx(expected)
    assert "test" not in " ".join(r.train_splits)


def test_mcan_lr_generalises():
    assert mcan_lr(0, 1.0, warmup_epochs=1, decay_epochs=[2], decay_rate=0.5) == 0.5
    assert mcan_lr(5, 1.0, warmup_epochs=1, decay_epochs=[2, 4], decay_rate=0.5) == 0.25
    assert mcan_lr(1, 1.0, warmup_epochs=1, decay_epochs=[2, 4], decay_rate=0.5) == 1.0


def _write(tmp_path, text):
    path = tmp_path / "r.yaml"
    path.write_text(text)
    return str(path)


GOOD = """\
optimizer: {name: adam, betas: [0.9, 0.98]}
schedule: {name: constant, base_lr: 0.001}
epochs: 2
batch_size: 4
loss: bce-sum
"""


def test_replace_validates(tmp_path):
    r = load_recipe(_write(tmp_path, GOOD))
    assert r.replace(epochs=1, batch_size=2).epochs == 1
    with pytest.raises(ReproError, match="epochs"):
        r.replace(epochs=0)
    with pytest.raises(ReproError, match="unknown"):
        r.replace(speed=3)


@pytest.mark.parametrize(
    "change, line, word",
    [
        (GOOD.replace("epochs: 2", "epochs: 0"), 3, "epochs"),
        (GOOD.replace("adam,", "adamm,"), 1, "adamm"),
        (GOOD.replace("loss: bce-sum", "loss: hinge"), 5, "loss"),
        (GOOD + "train_splits: [train, test-dev]\n", 6, "test"),
        (GOOD + "warmup: 3\n", 6, "warmup"),
        (GOOD.replace("base_lr: 0.001", "base_lr: fast"), 2, "base_lr"),
    ],
)
def test_bad_recipes_point_at_their_line(tmp_path, change, line, word):
    path = _write(tmp_path, change)
    with pytest.raises(ReproError, match=rf"r\.yaml:{line}: .*{word}"):
        load_recipe(path)


def test_unknown_recipe_lists_the_known_ones():
    with pytest.raises(ReproError, match="mcan-pa/vqa2"):
        load_recipe("mcan-pa/vqa3")


def test_cosine_is_albefs_schedule():
    from repro.train.schedule import learning_rate

    r = load_recipe("ace-rpe/pretrain")
    assert learning_rate(r.schedule, 0, 0) == pytest.approx(1e-5)  # warm-up starts at 1e-5
    assert learning_rate(r.schedule, 0, 1000) == pytest.approx(1e-5 + (1e-4 - 1e-5) / 2)
    assert learning_rate(r.schedule, 0, 2000) == pytest.approx(1e-4)
    assert learning_rate(r.schedule, 15, 0) == pytest.approx((1e-4 + 1e-6) / 2)  # half the cosine
    assert epoch_rates(load_recipe("ace-rpe/retrieval-coco").schedule, 5)[0] == pytest.approx(1e-5)
