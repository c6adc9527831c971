"""WUPS: the threshold rule and the directions, on a small fake taxonomy and on the real WordNet 3.0."""

import os

import pytest

from repro.errors import ReproError
from repro.metrics import wordnet, wups


class FakeSynset:
    def __init__(self, name, table):
        self.name, self.table = name, table

    def wup_similarity(self, other):
        return self.table.get((self.name, other.name), 0.0)


class FakeWordNet:
    """Words with one synset each; a deliberately asymmetric similarity table."""

    def __init__(self, table):
        self.table = table

    def synsets(self, word, pos=None):
        known = {a for a, _ in self.table} | {b for _, b in self.table}
        return [FakeSynset(word, self.table)] if word in known else []


TABLE = {("cat", "dog"): 0.8, ("dog", "cat"): 0.6, ("cup", "mug"): 0.95, ("mug", "cup"): 0.95}


def test_threshold_rule_full_score_at_or_above_tenth_below():
    wn = FakeWordNet(TABLE)
    assert wups.Measure(0.9, wn)("cup", "mug") == 0.95
    assert wups.Measure(0.9, wn)("cat", "dog") == pytest.approx(0.08)
    assert wups.Measure(0.8, wn)("cat", "dog") == 0.8  # exactly at the threshold: kept
    assert wups.Measure(0.0, wn)("cat", "dog") == 0.8


def test_identical_strings_score_one_even_outside_wordnet_and_unknown_words_zero():
    wn = FakeWordNet(TABLE)
    assert wups.Measure(0.9, wn)("zzz", "zzz") == 1.0
    assert wups.Measure(0.9, wn)("zzz", "dog") == 0.0


def test_cocoqa_takes_gold_to_prediction_only():
    r = wups.evaluate(["cat"], ["dog"], threshold=0.0, variant="cocoqa", wordnet=FakeWordNet(TABLE))
    assert r.aggregate["wups@0.0"] == pytest.approx(80.0)


def test_malinowski_takes_the_smaller_direction():
    r = wups.evaluate(["cat"], ["dog"], threshold=0.0, variant="malinowski", wordnet=FakeWordNet(TABLE))
    assert r.aggregate["wups@0.0"] == pytest.approx(60.0)


def test_malinowski_sets_multiply_best_matches():
    # gold {cup, cat}, prediction {mug}: left = m(cup,mug) * m(cat,mug) = 0.95 * 0; right = max(m(mug,cup), m(mug,cat))
    wn = FakeWordNet(TABLE)
    assert wups.score_malinowski("cup,cat", "mug", wups.Measure(0.0, wn)) == 0.0
    assert wups.score_malinowski("cup, cup", "mug", wups.Measure(0.0, wn)) == pytest.approx(0.95 * 0.95)


def test_minus_one_is_exact_match():
    r = wups.evaluate(["cup", "cat"], ["cup", "dog"], threshold=-1, wordnet=FakeWordNet(TABLE))
    assert r.aggregate["wups@-1.0"] == 50.0


def test_cocoqa_cache_key_quirk():
    # "a,b"+"c" and "a"+"b,c" share the cache key "a,b,c": the second pair reuses the first score
    table = {("a,b", "c"): 0.95, ("c", "a,b"): 0.95, ("a", "b,c"): 0.1, ("b,c", "a"): 0.1}
    r = wups.evaluate(["a,b", "a"], ["c", "b,c"], threshold=0.9, wordnet=FakeWordNet(table))
    assert r.per_item == {0: pytest.approx(95.0), 1: pytest.approx(95.0)}


# --- the real WordNet 3.0 -------------------------------------------------------------------------


def _wordnet_or_skip():
    try:
        return wordnet.load()
    except ReproError as exc:
        pytest.skip(f"WordNet 3.0 unavailable: {exc}")


@pytest.fixture(scope="module")
def real_wordnet(tmp_path_factory):
    old = os.environ.get("REPRO_DATA_DIR")
    os.environ["REPRO_DATA_DIR"] = str(tmp_path_factory.mktemp("data"))
    try:
        yield _wordnet_or_skip()
    finally:
        if old is None:
            os.environ.pop("REPRO_DATA_DIR")
        else:
            os.environ["REPRO_DATA_DIR"] = old


def test_real_wordnet_is_version_3_0(real_wordnet):
    assert real_wordnet.get_version() == "3.0"
    assert real_wordnet.synset("dog.n.01").lexname() == "noun.animal"


def test_real_wup_values(real_wordnet):
    dog, cat = real_wordnet.synset("dog.n.01"), real_wordnet.synset("cat.n.01")
    assert dog.wup_similarity(cat) == pytest.approx(0.857142857, abs=1e-6)  # 2*12 / (2 + 2 + 2*12)
    m9 = wups.Measure(0.9, real_wordnet)
    assert m9.wup("dog", "cat") == pytest.approx(6 / 7)  # best pair over all noun senses
    assert m9("dog", "cat") == pytest.approx(0.1 * 6 / 7)  # below 0.9: a tenth
    assert m9("car", "truck") == pytest.approx(11 / 12)  # above 0.9: in full
    assert wups.Measure(6 / 7, real_wordnet)("dog", "cat") == pytest.approx(6 / 7)  # at the threshold
    assert m9("dogs", "dog") == 1.0  # the plural lemmatises to the same synsets


def test_real_wups_at_both_thresholds(real_wordnet):
    gold, pred = ["dog", "red", "table", "cat"], ["dog", "blue", "chair", "xqzv"]
    at0 = wups.evaluate(gold, pred, 0.0, wordnet=real_wordnet).aggregate["wups@0.0"]
    at9 = wups.evaluate(gold, pred, 0.9, wordnet=real_wordnet).aggregate["wups@0.9"]
    acc = wups.evaluate(gold, pred, -1, wordnet=real_wordnet).aggregate["wups@-1.0"]
    assert acc == 25.0 and acc < at9 < at0 <= 100.0


def test_staging_debian_files_writes_lexnames(tmp_path):
    if not (wordnet.DEBIAN_DIR / "data.noun").is_file():
        pytest.skip("Debian's wordnet-base is not installed (make wordnet installs it as root)")
    dest = wordnet.stage_debian(dest=tmp_path / "wn")
    lines = (dest / "lexnames").read_text().splitlines()
    assert len(lines) == 45 and lines[5] == "05\tnoun.animal\t1" and lines[44] == "44\tadj.ppl\t3"
    assert wordnet.is_dict_dir(dest) and not list(tmp_path.glob(".wordnet.*"))


def test_staging_never_deletes_what_is_already_there(tmp_path):
    """An interrupted download or the user's own files where the staged copy would go stay as they are."""
    source = tmp_path / "debian"
    source.mkdir()
    for name in wordnet.NEEDED:
        (source / name).write_text("")
    dest = tmp_path / "wordnet"
    (dest / "wordnet").mkdir(parents=True)
    (dest / "wordnet" / "data.noun").write_text("half a download")
    with pytest.raises(ReproError, match="not a complete WordNet 3.0 dict folder; nothing was changed"):
        wordnet.stage_debian(source=source, dest=dest)
    assert (dest / "wordnet" / "data.noun").read_text() == "half a download"
    assert not list(tmp_path.glob(".wordnet.*"))
    empty = tmp_path / "empty"
    empty.mkdir()
    assert wordnet.is_dict_dir(wordnet.stage_debian(source=source, dest=empty))


def test_missing_wordnet_says_how_to_get_it(tmp_path, monkeypatch):
    monkeypatch.setenv("REPRO_DATA_DIR", str(tmp_path))
    monkeypatch.setattr(wordnet, "DEBIAN_DIR", tmp_path / "nowhere")
    import nltk

    monkeypatch.setattr(nltk.data, "path", [str(tmp_path / "nltk")])
    with pytest.raises(ReproError, match="repro download wordnet"):
        wordnet.load()


def test_downloaded_nltk_zip_layout_is_found(tmp_path, monkeypatch):
    """`repro download wordnet` unpacks NLTK's wordnet.zip, which holds a `wordnet/` folder."""
    if not (wordnet.DEBIAN_DIR / "data.noun").is_file():
        pytest.skip("Debian's wordnet-base is not installed (make wordnet installs it as root)")
    monkeypatch.setenv("REPRO_DATA_DIR", str(tmp_path))
    wordnet.stage_debian(dest=tmp_path / "wordnet" / "wordnet")
    monkeypatch.setattr(wordnet, "DEBIAN_DIR", tmp_path / "nowhere")
    assert wordnet.locate() == tmp_path / "wordnet" / "wordnet"
