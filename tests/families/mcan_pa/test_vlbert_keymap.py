"""VL-BERT's checkpoint layouts (jackroos/VL-BERT: `ResNetVLBERT` with the "mlm" or "2fc" classifier, and the
pre-training model) into our VL-BERT by the key map, strictly: sizes read off the file's own keys, one line for what
does not map, nothing loaded half. The official outputs are test_vlbert_golden.py's."""

import re

import pytest
import torch

from repro.errors import ReproError
from repro.families.mcan_pa import vlbert_keymap
from repro.families.mcan_pa.build import build_model, model_sizes
from repro.families.mcan_pa.config import VlBertConfig
from repro.families.mcan_pa.vlbert_pretraining import VLBertPretraining

SIZES = {
    "vocab": 128,  # WordPiece mode: bert-base-uncased's special ids (101-103) fit
    "hidden": 32,
    "layers": 2,
    "heads": 2,
    "ffn": 64,
    "max_positions": 40,
    "max_tokens": 6,
    "max_boxes": 5,
    "feature_dim": 24,
    "visual_geometry_dim": vlbert_keymap.GEOMETRY_DIM,
    "head_hidden": 48,
}
ANSWERS = 7
FULL = model_sizes(VlBertConfig(arch="vl-bert"), SIZES)
# this project's names -> VL-BERT's: the key map read backwards
OFFICIAL = (
    (r"embeddings\.LayerNorm\.", "vlbert.embedding_LayerNorm."),
    (r"embeddings\.", "vlbert."),
    (r"end_embedding\.", "vlbert.end_embedding."),
    (r"visual_norm_(text|object)\.", r"vlbert.visual_ln_\1."),
    (r"layers\.", "vlbert.encoder.layer."),
    (r"regions\.project\.1\.", "image_feature_extractor.obj_downsample.1."),
    (r"object_embedding\.", "object_linguistic_embeddings."),
    (r"head\.", "final_mlp."),
    (r"mlm\.predictions\.decoder\.bias", None),  # the MLM bias, saved once by VL-BERT
    (r"mlm\.", "vlbert.mlm_head."),
    (r"mvrc\.0\.", "vlbert.mvrc_head.transform.dense."),
    (r"mvrc\.2\.", "vlbert.mvrc_head.region_cls_pred."),
    (r"masked_feature\.", "object_mask_visual_embedding."),
    (r"masked_object_word\.", "object_mask_word_embedding."),
    (r"text_only_visual\.", "aux_text_visual_embedding."),
)


def official_state(model, ddp=True) -> dict[str, torch.Tensor]:
    """`model`'s weights, randomised, under VL-BERT's names (`module.` as DistributedDataParallel saves them)."""
    torch.manual_seed(0)
    out = {}
    for key, value in model.state_dict().items():
        for pattern, name in OFFICIAL:
            if re.match(pattern, key):
                if name is not None:
                    out[re.sub(pattern, name, key, count=1)] = value
                break
        else:
            raise AssertionError(key)
    words = out.get("vlbert.word_embeddings.weight")
    out = {k: (words if k.endswith("decoder.weight") else torch.randn_like(v)) for k, v in out.items()}
    if words is not None and "vlbert.mlm_head.predictions.decoder.weight" in out:
        out["vlbert.mlm_head.predictions.decoder.weight"] = out["vlbert.word_embeddings.weight"]  # tied
    return {f"module.{k}": v for k, v in out.items()} if ddp else out


def _vqa(classifier="mlm", **config):
    return build_model({"arch": "vl-bert", "classifier": classifier, **config}, 2, ANSWERS, sizes=SIZES)


def _save(tmp_path, state, name="vl-bert_base_res101_vqa-best.model"):
    path = tmp_path / name
    torch.save({"state_dict": state, "optimizer": {}}, path)  # VL-BERT's Checkpoint callback
    return path


@pytest.mark.parametrize("classifier", ["mlm", "2fc"])
def test_vqa_checkpoint_loads_strictly_and_every_tensor_lands(classifier):
    official = official_state(_vqa(classifier))
    model = _vqa(classifier)
    report = vlbert_keymap.load_vlbert(model, official)
    assert report.missing == [] and report.unexpected == [] and report.reshaped == []
    assert len(report.placed) == len(official) == len(model.state_dict())
    ours = model.state_dict()
    assert torch.equal(ours["end_embedding.weight"], official["module.vlbert.end_embedding.weight"])
    assert torch.equal(ours["visual_norm_text.bias"], official["module.vlbert.visual_ln_text.bias"])
    assert torch.equal(
        ours["embeddings.token_type_embeddings.weight"], official["module.vlbert.token_type_embeddings.weight"]
    )
    last = "head.2.weight" if classifier == "mlm" else "head.4.weight"
    assert torch.equal(ours[last], official[f"module.final_mlp.{last[5:]}"])


def test_sizes_of_an_mlm_file_are_read_off_its_own_keys(tmp_path):
    """The released VQA configs' "mlm" classifier has no final_mlp.1: its sizes come from final_mlp.2."""
    for classifier in ("mlm", "2fc"):
        path = _save(tmp_path, official_state(_vqa(classifier)))
        state = vlbert_keymap.read_checkpoint(path)
        sizes, info = vlbert_keymap.sizes_from_state(state, heads=SIZES["heads"])
        assert info == {"layout": "vqa", "classifier": classifier, "answers": ANSWERS}
        assert all(SIZES[k] == v for k, v in sizes.items())
        model = vlbert_keymap.build_for(state, heads=SIZES["heads"])
        assert model.classifier == classifier and vlbert_keymap.load_vlbert(model, state).missing == []


def test_the_pretraining_layout_loads_into_the_pretraining_model_with_its_tied_decoder():
    model = VLBertPretraining(FULL, region_classes=11)
    official = official_state(model)
    report = vlbert_keymap.load_vlbert(model, official)
    assert report.missing == [] and report.unexpected == []
    assert model.mlm.predictions.decoder.weight is model.embeddings.word_embeddings.weight
    bias = official["module.vlbert.mlm_head.predictions.bias"]
    assert torch.equal(model.mlm.predictions.decoder.bias, bias) and torch.equal(model.mlm.predictions.bias, bias)
    untied = dict(official)
    untied["module.vlbert.mlm_head.predictions.decoder.weight"] = torch.zeros(SIZES["vocab"], SIZES["hidden"])
    with pytest.raises(ReproError, match="are one tensor"):
        vlbert_keymap.load_vlbert(VLBertPretraining(FULL, region_classes=11), untied)


def _refused(model, state, match):
    before = {k: v.clone() for k, v in model.state_dict().items()}
    with pytest.raises(ReproError, match=match) as info:
        vlbert_keymap.load_vlbert(model, state)
    assert "\n" not in str(info.value)
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items()), "nothing is loaded half"


def test_renamed_missing_wrong_shape_and_unmapped_keys_are_one_line_and_load_nothing():
    state = official_state(_vqa(), ddp=False)
    renamed = dict(state)
    renamed["vlbert.encoder.layer.0.attention.self.qurey.weight"] = renamed.pop(
        "vlbert.encoder.layer.0.attention.self.query.weight"
    )
    _refused(_vqa(), renamed, r"unexpected key vlbert\.encoder\.layer\.0\.attention\.self\.qurey\.weight")
    missing = {k: v for k, v in state.items() if k != "vlbert.encoder.layer.1.intermediate.dense.bias"}
    _refused(_vqa(), missing, r"missing key for layers\.1\.intermediate\.dense\.bias")
    wrong = dict(state, **{"final_mlp.2.weight": torch.zeros(ANSWERS + 1, SIZES["hidden"])})
    _refused(_vqa(), wrong, r"final_mlp\.2\.weight has shape \(8, 32\), this model's head\.2\.weight \(7, 32\)")
    _refused(_vqa("2fc"), state, r"the 'mlm' classifier; the model has '2fc'")
    one = {k: v for k, v in official_state(_vqa("2fc"), ddp=False).items() if not k.startswith("final_mlp.4")}
    _refused(_vqa("2fc"), one, r"'1fc' classifier")
    e2e = dict(state, **{"image_feature_extractor.backbone.conv1.weight": torch.zeros(1)})
    _refused(_vqa(), e2e, r"end-to-end Fast R-CNN")
    scales = dict(state, **{"vlbert.visual_scale_text": torch.zeros(())})
    _refused(_vqa(), scales, r"visual_ln false")
    _refused(_vqa(positional=["pwa"], fusion="eq8"), state, "without PA")
    pretraining = official_state(VLBertPretraining(FULL, region_classes=11))
    _refused(_vqa(), pretraining, r"pre-training layout; a VQA model starts from it")


def test_a_pretraining_file_starts_a_vqa_model_with_pa_its_new_modules_fresh():
    official = official_state(VLBertPretraining(FULL, region_classes=11))
    model = _vqa(positional=["pwa", "poa", "pma"], fusion="eq8")
    report = vlbert_keymap.load_pretraining_into_vqa(model, official)
    assert {k for k in report.missing if not k.startswith("head.")} == {
        k for k in model.state_dict() if k.startswith(("word_pos", "box_proj.", "pwa.", "poa.", "pma."))
    }
    two = _vqa("2fc")
    report = vlbert_keymap.load_pretraining_into_vqa(two, official)
    assert (
        "the '2fc' classifier has no place for it"
        in dict(report.unexpected)["vlbert.mlm_head.predictions.transform.dense.weight"]
    )
    with pytest.raises(ReproError, match="a VQA checkpoint, not VL-BERT's pre-training"):
        vlbert_keymap.load_pretraining_into_vqa(_vqa(), official_state(_vqa()))


def test_truncated_files_are_one_line(tmp_path):
    path = _save(tmp_path, official_state(_vqa()))
    path.write_bytes(path.read_bytes()[:1000])
    with pytest.raises(ReproError, match=r"not a readable PyTorch checkpoint") as info:
        vlbert_keymap.read_checkpoint(path)
    assert str(path) in str(info.value) and "\n" not in str(info.value)


def test_the_family_converts_the_vlbert_layout_at_any_width(tmp_path):
    from repro.cli.weights import convert_checkpoint

    path = _save(tmp_path, official_state(_vqa()))
    state, report = convert_checkpoint(path, "mcan-pa", "vl-bert")  # heads are not in the shapes, nor needed here
    assert report.counts() == {"placed": len(state), "reshaped": 0, "missing": 0, "unexpected": 0}
    path = _save(tmp_path, official_state(VLBertPretraining(FULL, region_classes=11)), "vl-bert-base-prec.model")
    state, report = convert_checkpoint(path, "mcan-pa", "vl-bert")
    assert report.missing == [] and "mvrc.2.weight" in state
