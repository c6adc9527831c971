"""Pre-trainings shared across tables (`repro.families.ace_rpe.pretrained`): the key, the store, the lock, and
`repro run` reusing a stored pre-training in a second table."""

from __future__ import annotations

import json
import pickle
import threading
from pathlib import Path

import pytest
import torch

from repro import specs
from repro.cli import app
from repro.errors import ReproError
from repro.families import load_recipe
from repro.families.ace_rpe import pretrained as store
from repro.families.ace_rpe.config import ALBEFConfig
from repro.paths import REPO_DIR
from repro.train.stage_plan import read_stages

K1, K2, A, B, C = (f"{n:016x}" for n in (0xA1, 0xA2, 0xB1, 0xB2, 0xB3))  # names as `store.key` gives them


def _key(config=None, sizes=None, seed=0, data="d"):
    config = config or ALBEFConfig(arch="albef", position_embedding="ace-rpe")
    recipe = load_recipe("ace-rpe/pretrain").replace(seed=seed)
    return store.key(config, sizes or {"hidden_size": 64}, recipe, data)[0]


def test_the_key_names_what_the_network_is_trained_with_and_not_the_corpus_switch():
    base = _key()
    assert _key(seed=1) != base and _key(sizes={"hidden_size": 32}) != base and _key(data="e") != base
    assert _key(ALBEFConfig(arch="albef", position_embedding="none")) != base
    # the 14M rows read the same generated pairs at the generated scales: the data's hash decides
    assert _key(ALBEFConfig(arch="albef", position_embedding="ace-rpe", pretrain="14m")) == base
    assert _key(ALBEFConfig(arch="albef", position_embedding="ace-rpe", task="retrieval")) == base


def test_the_key_does_not_name_where_the_recipe_file_is(tmp_path):
    """Two checkouts (or an installed copy) with the same recipe share a pre-training: the key holds the recipe's
    settings, not its file's path."""
    recipe = load_recipe("ace-rpe/pretrain")
    elsewhere = recipe.replace(path=tmp_path / "other-checkout" / "pretrain.yaml")  # as another clone loads it
    config = ALBEFConfig(arch="albef", position_embedding="ace-rpe")
    assert (
        store.key(config, {"hidden_size": 64}, elsewhere, "d")[0]
        == store.key(config, {"hidden_size": 64}, recipe, "d")[0]
    )


def test_the_data_hash_reads_the_files_content(tmp_path):
    (tmp_path / "a.json").write_text('[{"image": "x.png", "caption": "a"}]')
    (tmp_path / "x.png").write_bytes(b"one")
    (tmp_path / "vocab").mkdir()
    (tmp_path / "vocab" / "vocab.txt").write_text("[PAD]\n")
    files = store.pretraining_files(tmp_path / "vocab", [(tmp_path / "a.json", tmp_path)])
    assert [f.name for f in files] == ["vocab.txt", "a.json", "x.png"]
    first = store.data_hash(files, {"max_tokens": 16})
    assert store.data_hash(files, {"max_tokens": 30}) != first
    (tmp_path / "x.png").write_bytes(b"two")
    assert store.data_hash(files, {"max_tokens": 16}) != first


def test_one_pre_training_per_key_when_two_units_ask_at_once(sandbox):
    calls = []

    def train(missing):
        calls.append(missing)
        return [({"w": torch.arange(3.0)}, {"steps": 7, "final_loss": 0.5}) for _ in missing]

    out = {}

    def unit(i):
        who = {"spec": "s", "row": f"r{i}", "seed": 0, "scale": "smoke"}
        out[i] = store.shared([K1], [{"what": 1}], [who], train)[0]

    threads = [threading.Thread(target=unit, args=(i,)) for i in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert calls == [[0]]
    trained = [i for i in out if not out[i][1]["reused"]]
    assert len(trained) == 1
    for weights, training in out.values():
        assert torch.equal(weights["w"], torch.arange(3.0)) and training["steps"] == 7 and training["hash"] == K1
        assert training["trained_by"]["row"] == f"r{trained[0]}"
    saved = json.loads((sandbox / "data" / "pretrained" / K1 / "provenance.json").read_text())
    assert saved["key"] == {"what": 1} and saved["training"] == {"steps": 7, "final_loss": 0.5}
    assert not list((sandbox / "data" / "pretrained").glob(f".{K1}*"))  # no staging folder left behind


def test_seeds_asking_together_train_only_the_missing_pre_trainings_together(sandbox):
    store.shared([A], [{}], [{"seed": 0}], lambda missing: [({"w": torch.zeros(1)}, {"steps": 1})])
    calls = []

    def train(missing):
        calls.append(missing)
        return [({"w": torch.full((1,), float(i))}, {"steps": 2}) for i in missing]

    got = store.shared([A, B, C], [{}, {}, {}], [{"seed": s} for s in range(3)], train)
    assert calls == [[1, 2]]  # seed 0's was stored: the other two trained together
    assert [t["reused"] for _, t in got] == [True, False, False]
    assert [float(w["w"]) for w, _ in got] == [0.0, 1.0, 2.0] and got[2][1]["trained_by"]["together"] == 2


def test_a_stored_pre_training_that_asks_to_run_code_is_refused_in_one_line(sandbox):
    store.shared([K2], [{}], [{}], lambda missing: [({"w": torch.zeros(1)}, {"steps": 1})])
    path = sandbox / "data" / "pretrained" / K2 / "model.pt"

    class Planted:
        def __reduce__(self):
            return (print, ("planted",))

    path.write_bytes(pickle.dumps(Planted()))
    with pytest.raises(ReproError, match=f"{K2}: a stored pre-training that cannot be read"):
        store.read(K2)


def test_a_stored_pre_training_with_unusable_weights_is_refused(sandbox):
    store.shared([K2], [{}], [{}], lambda missing: [({"w": torch.zeros(2)}, {"steps": 1})])
    torch.save({"w": torch.tensor([0.0, float("nan")])}, sandbox / "data" / "pretrained" / K2 / "model.pt")
    with pytest.raises(ReproError, match="NaN or infinite"):
        store.read(K2)


@pytest.mark.parametrize("name", ["../outside", "k1", "/tmp/x", ".hidden0123456789"])
def test_only_a_key_names_a_stored_pre_training(sandbox, name):
    with pytest.raises(ReproError, match="not the name of a stored pre-training"):
        store.folder(name)


def _two_tables(sandbox: Path) -> None:
    """Table 8 at its smoke scale, cut for the suite, under its own id and a second one (the same pre-training)."""
    folder = sandbox / "experiments" / "ace-rpe"
    folder.mkdir(parents=True)
    text = (REPO_DIR / "experiments" / "ace-rpe" / "ace-rpe-table8-mode.yaml").read_text()
    smaller = "pretrain_images: 4, train_images: 4, test_images: 2"
    text = text.replace("pretrain_images: 12, train_images: 8, test_images: 4", smaller)
    assert smaller in text
    (folder / "ace-rpe-table8-mode.yaml").write_text(text)
    again = text.replace("id: ace-rpe-table8-mode", "id: ace-rpe-table8-again")
    (folder / "ace-rpe-table8-again.yaml").write_text(again)
    specs.clear_cache()


@pytest.mark.slow
def test_a_second_table_with_the_same_pre_training_trains_no_pre_training_step(sandbox, runner):
    _two_tables(sandbox)
    records = {}
    for ident in ("ace-rpe-table8-mode", "ace-rpe-table8-again"):
        words = ["run", ident, "--scale", "smoke", "--rows", "Contextual", "--workdir", str(sandbox / ident)]
        out = runner.invoke(app, words, env={"COLUMNS": "200"})
        assert out.exit_code == 0, out.output
        path = sandbox / "results" / "ace-rpe" / ident / "Contextual.smoke.json"
        records[ident] = json.loads(path.read_text())
    first = records["ace-rpe-table8-mode"]["extra"]["train"][0]["pretrain"]
    second = records["ace-rpe-table8-again"]["extra"]["train"][0]["pretrain"]
    assert first["reused"] is False and second["reused"] is True and first["hash"] == second["hash"]
    assert second["trained_by"]["spec"] == "ace-rpe-table8-mode" and second["steps"] == first["steps"] > 0
    assert list((sandbox / "ace-rpe-table8-mode").rglob("pretrain/train.jsonl"))
    assert not list((sandbox / "ace-rpe-table8-again").rglob("pretrain/train.jsonl"))  # no pre-training step
    # and `repro run`'s progress does not wait for one: the stage plan names the fine-tunings alone
    plans = {ident: read_stages(next((sandbox / ident).rglob("seed0"))) for ident in records}
    assert [name for name, _ in plans["ace-rpe-table8-mode"]] == [
        "pretrain",
        "flickr30k",
        "coco",
        "nlvr2_assign",
        "nlvr2",
    ]
    assert plans["ace-rpe-table8-again"] == plans["ace-rpe-table8-mode"][1:]
    # the same weights, so the same fine-tuning and the same numbers
    assert records["ace-rpe-table8-again"]["metrics"] == records["ace-rpe-table8-mode"]["metrics"]
    stored = sandbox / "data" / "pretrained" / first["hash"]
    weights = torch.load(stored / "model.pt", weights_only=True)
    assert "fusion.layer.0.crossattention.self.query.weight" in weights
