"""Generated TGIF-QA-like data: frame-feature "videos" and questions of the four tasks, in the official layout.

A video shows one subject (an identity vector present in every frame) performing a sequence of
distinct actions, each repeated a number of times. One repetition is `rep_frames` frames of the
action's pose followed by one rest frame, so repetitions are separable only by looking at the order
of frames. The subject's shirt has a colour that may change once, between two actions. Frame
feature = subject + pose (or rest) + shirt colour + Gaussian noise; the vectors are random unit
directions, fixed by the generator seed.

Questions (answers depend on temporal order or on counting over time). Multiple-choice candidates
and the action named in a Count question are 3-word verb phrases (`PHRASES`), and the questions are
short: the official code scores "question words + candidate words", and with long questions the
candidate is too small a part of the sequence for a small model to bind it to the video (pilots
stayed at chance; with the candidate alone they learned).
  action      "what <n> times ?"   5 candidates; the asked action is the one the video repeats most
              often (n its count, the counts of a video are distinct) and the video's other actions are
              among the distractors, so only comparing how often each candidate occurs tells them apart
  transition  "what after|before <action> ?"   5 candidates, the video's other actions among the
              distractors: only the order tells them apart
  count       "how many times <phrase> ?"   1..max_count, asked about a video of its own (`_count_video`): the
              subject repeats the named action, each repetition 1..2*rep_frames pose frames long, so the
              number of pose frames only hints at the count and the runs of poses between rest frames,
              an order signal, give it (as TGIF-QA's Count GIFs mostly show the one action counted)
  frameqa     "what color is the shirt of the <subject> when it <action>s ?" (type 2, colour) or
              "who <action>s ?" (type 0, object); the inflected verb is a word the candidates and the
              other questions never use, only its characters relate it to the action

Files written (official layout, tab-separated): `{Train,Test}_{task}_question.csv` and
`features.npy` (videos, frames, feature_dim) float16: the videos of the other tasks first, then Count's, each
split between train and test as they are. Count's videos are drawn from a random stream of their own, after
the others, so the other tasks' files are those of the generator before Count got its own videos (2026-11-26;
until then Count asked about a random one of the video's three actions, and every row stayed at chance).
"""

from __future__ import annotations

import csv
import json
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from repro.data.generated import same_config
from repro.datasets.tgif import COLUMNS, TASKS, file_name
from repro.errors import ReproError
from repro.families.base import GeneratorSettings

SUBJECTS = ("man", "woman", "girl", "boy", "dog", "cat", "bird", "horse", "baby", "panda")
ACTIONS = ("jump", "wave", "nod", "clap", "spin", "kick", "bow", "shrug", "wink", "dance", "sway", "run")
# Multiple-choice candidates are verb phrases, as TGIF-QA's are ("shake head", "blink eyes"); each word
# belongs to one action only, so a candidate is a third of its question + candidate sequence.
PHRASES = {
    "jump": "jump straight upward",
    "wave": "wave raised palm",
    "nod": "nod bowed head",
    "clap": "clap flat hands",
    "spin": "spin round fast",
    "kick": "kick high leg",
    "bow": "bow deep forward",
    "shrug": "shrug both shoulders",
    "wink": "wink left eye",
    "dance": "dance happy steps",
    "sway": "sway gently sideways",
    "run": "run quick pace",
}
COLORS = ("red", "blue", "green", "yellow", "black", "white", "pink", "brown")


@dataclass(frozen=True)
class GeneratorConfig(GeneratorSettings):
    seed: int = 0
    train_videos: int = 600
    test_videos: int = 200
    frames: int = 24
    feature_dim: int = 64
    num_subjects: int = 8
    num_actions: int = 10
    num_colors: int = 6
    actions_per_video: int = 3
    max_count: int = 4
    rep_frames: int = 1
    noise: float = 0.3
    color_change: float = 0.5  # probability that the shirt colour changes between two actions
    # Count videos hold max_count * rep_frames pose frames whatever the count, so that only the order of pose and
    # rest frames tells it (the positive control of VPSA's order signal; default: each repetition 1..2*rep_frames)
    count_fixed_frames: bool = False
    # Count videos start with their first pose frame (the lead of rest frames is drawn and not used, so the rest of
    # the stream is that of the default): with count_fixed_frames, where the last run ends tells the count (6 pose
    # frames and count - 1 rest frames between runs), an absolute frame position, the order signal VPSA's P adds
    # (Eq. 5-7), which a model blind to frame order lacks (the positive control of psac-control-vpsa-order)
    count_at_start: bool = False
    # Share of questions whose action words are written in rare forms (`word_forms`): every word naming an action
    # (the verb of a Trans. or FrameQA question, each word of a candidate or Count phrase) gets two letters appended,
    # drawn afresh per word, from a..m in Train and from n..z in Test, so a Test form is never a Train word and most
    # Train forms occur once or twice: the word table holds nothing about them, their characters name the action
    # (Table 5). Drawn from a stream of their own after everything else: the videos and answers stay the same.
    word_forms: float = 0.0
    # Share of FrameQA questions about the shirt's colour at the time of an action (the rest: "who <verb>s ?")
    color_questions: float = 0.7

    def key(self) -> str:
        # "-count2": Count on videos of its own; data generated before under the same settings is not reused
        return super().key() + "-count2"

    def longest(self) -> int:
        """Frames of the longest possible action sequence (counts distinct when max_count allows it)."""
        if self.max_count >= self.actions_per_video:
            reps = sum(range(self.max_count - self.actions_per_video + 1, self.max_count + 1))
        else:
            reps = self.actions_per_video * self.max_count
        return reps * (self.rep_frames + 1)

    def check(self) -> None:
        longest = self.longest()
        if longest > self.frames:
            raise ReproError(
                f"psac generator: {self.actions_per_video} actions of up to {self.max_count} repetitions x "
                f"{self.rep_frames + 1} frames = {longest} frames do not fit in {self.frames} frames"
            )
        if not 2 <= self.actions_per_video <= min(5, self.num_actions):
            raise ReproError("psac generator: actions_per_video must be 2..5 and at most num_actions")
        if self.num_actions < 5 or self.num_actions > len(ACTIONS):
            raise ReproError(f"psac generator: num_actions must be 5..{len(ACTIONS)}")
        if self.num_subjects > len(SUBJECTS) or self.num_colors > len(COLORS) or self.num_colors < 2:
            raise ReproError(f"psac generator: at most {len(SUBJECTS)} subjects and 2..{len(COLORS)} colours")
        if self.max_count < 2:
            raise ReproError("psac generator: max_count must be at least 2")
        if not (0.0 <= self.word_forms <= 1.0 and 0.0 <= self.color_questions <= 1.0):
            raise ReproError("psac generator: word_forms and color_questions are shares, 0..1")
        if self.max_count * (2 * self.rep_frames + 1) > self.frames:
            raise ReproError(
                f"psac generator: a Count video of {self.max_count} repetitions of up to {2 * self.rep_frames} "
                f"frames and a rest frame each does not fit in {self.frames} frames"
            )


def _directions(rng: np.random.Generator, n: int, d: int) -> np.ndarray:
    v = rng.normal(size=(n, d))
    return (v / np.linalg.norm(v, axis=1, keepdims=True)).astype(np.float32)


def _video(rng: np.random.Generator, cfg: GeneratorConfig, protos: dict[str, np.ndarray]) -> tuple[np.ndarray, dict]:
    subject = int(rng.integers(cfg.num_subjects))
    actions = [int(a) for a in rng.choice(cfg.num_actions, cfg.actions_per_video, replace=False)]
    # distinct repetition counts so that "what does X do n times" has one answer
    reps = [
        int(r)
        for r in rng.choice(
            np.arange(1, cfg.max_count + 1), cfg.actions_per_video, replace=cfg.max_count < cfg.actions_per_video
        )
    ]
    colors = [int(rng.integers(cfg.num_colors))]
    for _ in actions[1:]:
        if rng.random() < cfg.color_change:
            colors.append(int((colors[-1] + 1 + rng.integers(cfg.num_colors - 1)) % cfg.num_colors))
        else:
            colors.append(colors[-1])
    used = sum(r * (cfg.rep_frames + 1) for r in reps)
    lead = int(rng.integers(cfg.frames - used + 1))
    pose = [-1] * cfg.frames  # -1 = rest
    shirt = [colors[0]] * cfg.frames
    t = lead
    for i, (a, r) in enumerate(zip(actions, reps)):
        for _ in range(r):
            for _ in range(cfg.rep_frames):
                pose[t] = a
                shirt[t] = colors[i]
                t += 1
            shirt[t] = colors[i]
            t += 1
    for u in range(t, cfg.frames):
        shirt[u] = colors[-1]
    feats = protos["subject"][subject] + protos["color"][shirt]
    feats = feats + np.where(np.array(pose)[:, None] >= 0, protos["action"][np.maximum(pose, 0)], protos["rest"])
    feats = feats + rng.normal(scale=cfg.noise, size=feats.shape).astype(np.float32)
    return feats.astype(np.float16), {"subject": subject, "actions": actions, "reps": reps, "colors": colors}


def _count_video(
    rng: np.random.Generator, cfg: GeneratorConfig, protos: dict[str, np.ndarray]
) -> tuple[np.ndarray, int, int]:
    """A Count video: the subject repeats one action `count` times (1..max_count), each repetition 1..2*rep_frames
    pose frames then a rest frame, after a random lead of rest frames (none with `count_at_start`); (features,
    action, count)."""
    subject = int(rng.integers(cfg.num_subjects))
    action = int(rng.integers(cfg.num_actions))
    count = int(rng.integers(1, cfg.max_count + 1))
    if cfg.count_fixed_frames:  # max_count * rep_frames pose frames cut into `count` runs
        total = cfg.max_count * cfg.rep_frames
        cuts = np.sort(rng.choice(np.arange(1, total), count - 1, replace=False))
        lengths = np.diff(np.concatenate([[0], cuts, [total]]))
    else:
        lengths = rng.integers(1, 2 * cfg.rep_frames + 1, size=count)
    used = int(lengths.sum()) + count
    t = int(rng.integers(cfg.frames - used + 1))
    if cfg.count_at_start:
        t = 0
    posed = np.zeros(cfg.frames, dtype=bool)
    for length in lengths:
        posed[t : t + length] = True
        t += int(length) + 1
    color = int(rng.integers(cfg.num_colors))
    feats = (
        protos["subject"][subject]
        + protos["color"][color]
        + np.where(posed[:, None], protos["action"][action], protos["rest"])
    )
    feats = feats + rng.normal(scale=cfg.noise, size=feats.shape).astype(np.float32)
    return feats.astype(np.float16), action, count


def _candidates(rng: np.random.Generator, cfg: GeneratorConfig, correct: int, preferred: list[int]):
    others = [a for a in preferred if a != correct]
    rest = [a for a in rng.permutation(cfg.num_actions).tolist() if a != correct and a not in others]
    cands = [correct] + (others + rest)[:4]
    order = rng.permutation(5).tolist()
    cands = [cands[i] for i in order]
    return [PHRASES[ACTIONS[a]] for a in cands], cands.index(correct)


def _questions(rng: np.random.Generator, cfg: GeneratorConfig, info: dict, key: int) -> dict[str, list[dict]]:
    subj = SUBJECTS[info["subject"]]
    acts, reps, colors = info["actions"], info["reps"], info["colors"]
    out: dict[str, list[dict]] = {t: [] for t in TASKS}
    gif = f"synthetic_{key:06d}"
    top = max(reps)
    if reps.count(top) == 1:  # the most repeated action; the other actions are distractors
        i = reps.index(top)
        cands, ans = _candidates(rng, cfg, acts[i], acts)
        out["action"].append(
            {
                "gif_name": gif,
                "question": f"What {reps[i]} times ?",
                **{f"a{j + 1}": c for j, c in enumerate(cands)},
                "answer": ans,
            }
        )
    i = int(rng.integers(len(acts) - 1))
    if rng.random() < 0.5:
        q, correct = f"What after {ACTIONS[acts[i]]} ?", acts[i + 1]
    else:
        q, correct = f"What before {ACTIONS[acts[i + 1]]} ?", acts[i]
    cands, ans = _candidates(rng, cfg, correct, acts)
    out["transition"].append(
        {"gif_name": gif, "question": q, **{f"a{j + 1}": c for j, c in enumerate(cands)}, "answer": ans}
    )
    rng.integers(len(acts))  # the draw of Count's old question, kept so that FrameQA's questions stay as they were
    i = int(rng.integers(len(acts)))
    if rng.random() < cfg.color_questions:
        out["frameqa"].append(
            {
                "gif_name": gif,
                "question": f"what color is the shirt of the {subj} when it {ACTIONS[acts[i]]}s ?",
                "answer": COLORS[colors[i]],
                "type": 2,
                "description": "",
            }
        )
    else:
        out["frameqa"].append(
            {"gif_name": gif, "question": f"who {ACTIONS[acts[i]]}s ?", "answer": subj, "type": 0, "description": ""}
        )
    return out


# Words that name an action: the verbs, the words of their phrases and FrameQA's inflected verbs ("jumps").
ACTION_WORDS = frozenset(ACTIONS) | {w for p in PHRASES.values() for w in p.split()} | {f"{a}s" for a in ACTIONS}
FORM_LETTERS = {"Train": "abcdefghijklm", "Test": "nopqrstuvwxyz"}  # a Test form is never a Train word
TEXT_FIELDS = ("question", "a1", "a2", "a3", "a4", "a5")


def rare_form(rng: np.random.Generator, word: str, split: str) -> str:
    """`word` with two letters of the split's half of the alphabet appended, drawn again while that makes another
    action's word ("bow" + "ed")."""
    letters = FORM_LETTERS[split]
    while True:
        form = word + "".join(letters[int(i)] for i in rng.integers(len(letters), size=2))
        if form not in ACTION_WORDS:
            return form


def write_forms(rng: np.random.Generator, share: float, split: str, question: dict) -> bool:
    """With probability `share`, every action word of the question and its candidates in a rare form (in place);
    True when it did. One draw per question, then two per action word."""
    if rng.random() >= share:
        return False
    for name in TEXT_FIELDS:
        if name in question:
            words = str(question[name]).split(" ")
            question[name] = " ".join(rare_form(rng, w, split) if w in ACTION_WORDS else w for w in words)
    return True


def count_stream(cfg: GeneratorConfig) -> np.random.Generator:
    """The random stream Count's videos are drawn from (`_count_video`, one call a video, train then test)."""
    return np.random.default_rng([cfg.seed, 1])


def generate(root: Path, cfg: GeneratorConfig) -> Path:
    """Write the question files and features under `root` (skipped when already there); returns root."""
    root = Path(root)
    stamp = root / "generator.json"
    if stamp.is_file() and same_config(json.loads(stamp.read_text()), asdict(cfg)):
        return root
    root.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(cfg.seed)
    d = cfg.feature_dim
    protos = {
        "subject": _directions(rng, cfg.num_subjects, d),
        "action": _directions(rng, cfg.num_actions, d),
        "color": 0.7 * _directions(rng, cfg.num_colors, d),
        "rest": _directions(rng, 1, d)[0],
    }
    n = cfg.train_videos + cfg.test_videos
    features = np.zeros((2 * n, cfg.frames, d), dtype=np.float16)  # the other tasks' videos, then Count's
    rows: dict[tuple[str, str], list[dict]] = {(s, t): [] for s in ("Train", "Test") for t in TASKS}
    for key in range(n):
        features[key], info = _video(rng, cfg, protos)
        split = "Train" if key < cfg.train_videos else "Test"
        for task, qs in _questions(rng, cfg, info, key).items():
            for q in qs:
                q["key"] = key
                q["vid_id"] = f"{task.upper()}{len(rows[(split, task)]) + 1}"
                rows[(split, task)].append(q)
    counting = count_stream(cfg)  # Count's own stream: the other tasks' draws stay as they were
    for video in range(n):
        key = n + video
        features[key], action, count = _count_video(counting, cfg, protos)
        split = "Train" if video < cfg.train_videos else "Test"
        question = {
            "gif_name": f"synthetic_{key:06d}",
            "question": f"How many times {PHRASES[ACTIONS[action]]} ?",
            "answer": count,
            "key": key,
            "vid_id": f"COUNT{len(rows[(split, 'count')]) + 1}",
        }
        rows[(split, "count")].append(question)
    if cfg.word_forms > 0:  # a stream of their own, after every video and answer is drawn
        forms = np.random.default_rng([cfg.seed, 2])
        for (split, _), qs in rows.items():
            for q in qs:
                write_forms(forms, cfg.word_forms, split, q)
    np.save(root / "features.npy", features)
    for (split, task), qs in rows.items():
        with open(root / file_name(split, task), "w", newline="", encoding="utf-8") as fh:
            w = csv.DictWriter(fh, fieldnames=COLUMNS[task], delimiter="\t", lineterminator="\n")
            w.writeheader()
            for q in qs:
                w.writerow({c: q[c] for c in COLUMNS[task]})
    stamp.write_text(json.dumps(asdict(cfg), indent=1))
    return root


def possible_counts(cfg: GeneratorConfig, pose_frames: int) -> list[int]:
    """The counts a Count video with `pose_frames` pose frames may have (`_count_video`): with
    `count_fixed_frames` every count has max_count * rep_frames of them, else count c has c..2*rep_frames*c."""
    counts = range(1, cfg.max_count + 1)
    if cfg.count_fixed_frames:
        return list(counts) if pose_frames == cfg.max_count * cfg.rep_frames else []
    return [c for c in counts if c <= pose_frames <= 2 * cfg.rep_frames * c]


def count_pose_frames(cfg: GeneratorConfig) -> list[tuple[int, int]]:
    """(count, pose frames) of every Count video, train then test, replayed from Count's own stream: `_count_video`
    on the same draws, with no noise and an action vector of ones on zeros, so a frame's first feature is 1 exactly
    where the subject poses (the stream's draws do not depend on the vectors or on the noise's scale)."""
    from dataclasses import replace

    d = cfg.feature_dim
    marked = {
        "subject": np.zeros((cfg.num_subjects, d), np.float32),
        "action": np.ones((cfg.num_actions, d), np.float32),
        "color": np.zeros((cfg.num_colors, d), np.float32),
        "rest": np.zeros(d, np.float32),
    }
    counting, quiet = count_stream(cfg), replace(cfg, noise=0.0)
    out = []
    for _ in range(cfg.train_videos + cfg.test_videos):
        features, _, count = _count_video(counting, quiet, marked)
        out.append((count, int((features[:, 0] > 0.5).sum())))
    return out


def mechanism_share(cfg: GeneratorConfig) -> dict[str, dict[str, tuple[int, int]]]:
    """Per task, its Test questions (the evaluation split of `repro run --scale synthetic`, written by `generate`
    into a temporary folder) and how many need each mechanism: {task: {"order" | "characters": (N, needing)}}.

    order (VPSA, Tables 3 and 4): Trans. always (the video's other actions are the distractors; only the order of
    their frames tells which comes after); Count where the number of pose frames fits more than one count
    (`possible_counts`), so only the runs of pose frames between rest frames give it; never Action (every
    repetition is rep_frames pose frames, so how often each action occurs is its share of the frames) nor FrameQA
    (the shirt's colour and the subject are in the frames of the action the question names).
    characters (Table 5): a word of the question or its candidates that no Train question or candidate of the task
    uses, so the frozen word table holds nothing learnt about it."""
    import tempfile

    from repro.datasets.tgif import read_questions, tokenize

    with tempfile.TemporaryDirectory() as folder:
        generate(Path(folder), cfg)
        questions = {
            (split, task): read_questions(Path(folder) / file_name(split, task))
            for split in ("Train", "Test")
            for task in TASKS
        }
    replayed = count_pose_frames(cfg)[cfg.train_videos :]
    out = {}
    for task in TASKS:
        test = questions[("Test", task)]
        seen = {w for q in questions[("Train", task)] for text in (q.question, *q.candidates) for w in tokenize(text)}
        unseen = sum(any(w not in seen for t in (q.question, *q.candidates) for w in tokenize(t)) for q in test)
        if task == "count":
            if [int(q.answer) for q in test] != [count for count, _ in replayed]:
                raise ReproError("psac generator: the replayed Count videos are not the written ones")
            order = sum(len(possible_counts(cfg, frames)) > 1 for _, frames in replayed)
        else:
            order = len(test) if task == "transition" else 0
        out[task] = {"order": (len(test), order), "characters": (len(test), unseen)}
    return out
