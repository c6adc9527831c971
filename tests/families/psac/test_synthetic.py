"""The generator's task-mix settings: off, the files are those made before, byte for byte; on, every drawn item's
label checked against its video, and every rare word form against the word it stands for."""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np
import pytest

from repro.datasets import tgif
from repro.errors import ReproError
from repro.families.psac.synthetic import (
    ACTION_WORDS,
    ACTIONS,
    COLORS,
    FORM_LETTERS,
    PHRASES,
    SUBJECTS,
    GeneratorConfig,
    _directions,
    generate,
)

SMALL = {"seed": 3, "train_videos": 12, "test_videos": 4, "frames": 8, "feature_dim": 8, "actions_per_video": 2,
         "max_count": 2}  # fmt: skip
RUNS = {**SMALL, "count_fixed_frames": True, "max_count": 3, "frames": 12, "actions_per_video": 3, "rep_frames": 1}
# sha256 over the files' names and bytes, generated before the task-mix settings existed
DIGESTS = {
    "small": "a77b14056e03610c8f3b1ee5914b098d1bf47c577a099c03fe0f85f4bebddbc0",
    "runs": "c5e6b05e2617daa3aff852db4538c0ed5855d39a187f92c214ada5207e6dc14a",
}


def digest(root: Path) -> str:
    h = hashlib.sha256()
    for path in sorted(root.iterdir()):
        if path.name != "generator.json":
            h.update(path.name.encode())
            h.update(path.read_bytes())
    return h.hexdigest()


@pytest.mark.parametrize("name, settings", [("small", SMALL), ("runs", RUNS)])
def test_with_the_new_settings_at_their_defaults_the_files_are_those_made_before(tmp_path, name, settings):
    explicit = {**settings, "word_forms": 0.0, "color_questions": 0.7, "count_at_start": False}
    assert digest(generate(tmp_path / "a", GeneratorConfig.from_mapping(settings))) == DIGESTS[name]
    assert digest(generate(tmp_path / "b", GeneratorConfig.from_mapping(explicit))) == DIGESTS[name]


def read(root: Path) -> dict[tuple[str, str], list]:
    return {(s, t): tgif.read_questions(root / tgif.file_name(s, t)) for s in ("Train", "Test") for t in tgif.TASKS}


def stem_of(form: str, split: str) -> str | None:
    """The action word a rare form stands for: the word less two letters of the split's half of the alphabet."""
    stem, tail = form[:-2], form[-2:]
    return stem if stem in ACTION_WORDS and all(c in FORM_LETTERS[split] for c in tail) else None


def test_rare_word_forms_stand_for_the_same_words_and_a_test_form_is_never_a_train_word(tmp_path):
    cfg = {**SMALL, "train_videos": 60, "test_videos": 30}
    plain = read(generate(tmp_path / "plain", GeneratorConfig.from_mapping(cfg)))
    formed_root = generate(tmp_path / "forms", GeneratorConfig.from_mapping({**cfg, "word_forms": 0.8}))
    formed = read(formed_root)
    assert np.array_equal(np.load(tmp_path / "plain" / "features.npy"), np.load(formed_root / "features.npy"))
    train_words = {w for t in tgif.TASKS for q in formed[("Train", t)] for x in (q.question, *q.candidates)
                   for w in tgif.tokenize(x)}  # fmt: skip
    rewritten = total = 0
    for (split, task), questions in formed.items():
        assert len(questions) == len(plain[(split, task)])
        for q, p in zip(questions, plain[(split, task)]):
            assert (q.key, q.answer) == (p.key, p.answer)  # the same video and answer
            changed = False
            for text, before in zip((q.question, *q.candidates), (p.question, *p.candidates)):
                words, old = text.split(" "), before.split(" ")
                assert len(words) == len(old)
                for w, o in zip(words, old):
                    if w != o:  # an action word, written in a form of the split
                        assert o in ACTION_WORDS and stem_of(w, split) == o, (w, o)
                        changed = True
                        if split == "Test":
                            assert w not in train_words  # unseen: the word table learned nothing of it
            # a question rewritten has every action word rewritten
            if changed:
                assert not any(w in ACTION_WORDS for x in (q.question, *q.candidates) for w in x.split(" "))
            rewritten += changed
            total += 1
    assert 0.65 < rewritten / total < 0.95  # word_forms 0.8 of the questions


def decode(root: Path, cfg: GeneratorConfig):
    """Each frame's (pose or -1 for rest, colour, subject) from the noise-free features, by the generator's
    prototypes drawn again from its seed."""
    rng = np.random.default_rng(cfg.seed)
    d = cfg.feature_dim
    subject = _directions(rng, cfg.num_subjects, d)
    action = _directions(rng, cfg.num_actions, d)
    color = 0.7 * _directions(rng, cfg.num_colors, d)
    rest = _directions(rng, 1, d)[0]
    poses = np.vstack([rest, action])  # index 0: rest
    combos = [(p - 1, c, s) for p in range(len(poses)) for c in range(cfg.num_colors) for s in range(cfg.num_subjects)]
    table = np.stack([poses[p + 1] + color[c] + subject[s] for p, c, s in combos])
    features = np.load(root / "features.npy").astype(np.float32)
    nearest = np.linalg.norm(features[:, :, None, :] - table[None, None], axis=-1).argmin(-1)
    return [[combos[i] for i in video] for video in nearest]


@pytest.mark.parametrize("forms", [0.0, 0.5])
def test_frameqa_questions_all_about_the_colour_at_the_time_of_the_named_action(tmp_path, forms):
    cfg = GeneratorConfig.from_mapping(
        {**SMALL, "train_videos": 40, "test_videos": 10, "noise": 0.0, "feature_dim": 32, "frames": 12,
         "actions_per_video": 3, "max_count": 3, "rep_frames": 1, "color_change": 1.0, "color_questions": 1.0,
         "word_forms": forms}
    )  # fmt: skip
    root = generate(tmp_path, cfg)
    frames = decode(root, cfg)
    seen = 0
    for split in ("Train", "Test"):
        for q in tgif.read_questions(root / tgif.file_name(split, "frameqa")):
            words = q.question.split(" ")
            assert words[:3] == ["what", "color", "is"]  # color_questions 1.0: no "who" question
            verb = words[-2]
            verb = verb if verb[:-1] in ACTIONS else stem_of(verb, split)
            named = ACTIONS.index(verb[:-1])
            colours = {COLORS[c] for p, c, _ in frames[q.key] if p == named}
            assert colours == {q.answer}, (q.question, colours, q.answer)  # the shirt while it does the action
            subject = {SUBJECTS[s] for _, _, s in frames[q.key]}
            assert len(subject) == 1 and words[7] == subject.pop()
            seen += 1
    assert seen == cfg.train_videos + cfg.test_videos


def test_colour_changes_make_the_colour_differ_between_consecutive_actions(tmp_path):
    cfg = GeneratorConfig.from_mapping(
        {**SMALL, "train_videos": 20, "test_videos": 5, "noise": 0.0, "feature_dim": 32, "color_change": 1.0}
    )
    frames = decode(generate(tmp_path, cfg), cfg)
    for video in frames[: cfg.train_videos + cfg.test_videos]:
        runs = [(p, c) for p, c, _ in video if p >= 0]
        for (p, c), (q, e) in zip(runs, runs[1:]):
            assert p == q or c != e  # a new action in a new colour


def test_shares_outside_zero_to_one_are_refused():
    for key in ("word_forms", "color_questions"):
        with pytest.raises(ReproError, match="shares"):
            GeneratorConfig.from_mapping({key: 1.5})


def test_every_action_word_is_a_word_of_one_action():
    owners = {}
    for a in ACTIONS:
        for w in {a, f"{a}s", *PHRASES[a].split()}:
            owners.setdefault(w, set()).add(a)
    assert set(owners) == ACTION_WORDS
    assert all(len(v) == 1 for v in owners.values())


def runs_of(poses: list[int]) -> list[tuple[int, int]]:
    """(first frame, length) of each run of pose frames (pose >= 0) in a decoded video."""
    out: list[tuple[int, int]] = []
    for t, p in enumerate(poses):
        if p >= 0 and (t == 0 or poses[t - 1] < 0):
            out.append((t, 0))
        if p >= 0:
            out[-1] = (out[-1][0], out[-1][1] + 1)
    return out


def count_items(root: Path, cfg: GeneratorConfig):
    """Every Count question with its decoded video's poses (pose or -1 for rest, per frame)."""
    frames = decode(root, cfg)
    for split in ("Train", "Test"):
        for q in tgif.read_questions(root / tgif.file_name(split, "count")):
            yield q, [p for p, _, _ in frames[q.key]]


COUNTING = {**SMALL, "train_videos": 60, "test_videos": 20, "noise": 0.0, "feature_dim": 32, "frames": 20,
            "actions_per_video": 3, "max_count": 3, "rep_frames": 2}  # fmt: skip


@pytest.mark.parametrize("at_start", [False, True])
def test_count_labels_are_the_runs_of_the_named_action_and_fixed_frames_leave_only_their_order(tmp_path, at_start):
    cfg = GeneratorConfig.from_mapping({**COUNTING, "count_fixed_frames": True, "count_at_start": at_start})
    root = generate(tmp_path, cfg)
    seen, leads = 0, set()
    for q, poses in count_items(root, cfg):
        runs = runs_of(poses)
        assert len(runs) == int(q.answer)  # the count is the number of runs
        named = {ACTIONS[p] for p in poses if p >= 0}
        assert len(named) == 1 and q.question == f"How many times {PHRASES[named.pop()]} ?"
        assert sum(n for _, n in runs) == cfg.max_count * cfg.rep_frames  # the same pose frames whatever the count
        assert all(b == a + n + 1 for (a, n), (b, _) in zip(runs, runs[1:]))  # one rest frame between runs
        leads.add(runs[0][0])
        if at_start:  # the last pose frame is frame max_count * rep_frames + count - 2: its position tells the count
            assert runs[0][0] == 0 and runs[-1][0] + runs[-1][1] - 1 == cfg.max_count * cfg.rep_frames + len(runs) - 2
        seen += 1
    assert seen == cfg.train_videos + cfg.test_videos
    assert (leads == {0}) == at_start


def test_count_at_start_moves_the_runs_and_changes_nothing_else(tmp_path):
    base = {**COUNTING, "count_fixed_frames": True}
    led = GeneratorConfig.from_mapping(base)
    first = GeneratorConfig.from_mapping({**base, "count_at_start": True})
    a, b = generate(tmp_path / "a", led), generate(tmp_path / "b", first)
    for task in ("action", "transition", "frameqa"):  # the other tasks' files, byte for byte
        for split in ("Train", "Test"):
            name = tgif.file_name(split, task)
            assert (a / name).read_bytes() == (b / name).read_bytes()
    assert (a / tgif.file_name("Train", "count")).read_bytes() == (b / tgif.file_name("Train", "count")).read_bytes()
    n = led.train_videos + led.test_videos
    fa, fb = np.load(a / "features.npy"), np.load(b / "features.npy")
    assert np.array_equal(fa[:n], fb[:n])  # the other tasks' videos
    for (_, led_poses), (_, first_poses) in zip(count_items(a, led), count_items(b, first)):
        lengths = [[n for _, n in runs_of(poses)] for poses in (led_poses, first_poses)]
        assert lengths[0] == lengths[1]  # the same runs, only where they start differs
