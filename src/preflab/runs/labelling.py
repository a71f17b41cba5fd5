"""Label your own trajectories: no policy, no env stepping.

:func:`start_labelling` makes a *labelling run* from trajectories you already have (from a
policy, a robot, a dataset): segments of ``segment_length`` steps are cut from each trajectory,
``pairs`` random pairs of them become round 0's queries, and the round (with its pool, for the
Groups view) is published, so that ``preflab studio RUN_DIR`` serves it as it serves a
training run. :func:`fit_labelled` then fits the run's reward ensemble on the answers (the run's
aggregator, the loop's reward trainer) and writes ``RUN_DIR/reward_model/``, which
:func:`preflab.load_reward_model` and :class:`preflab.policy.wrappers.LearnedReward` read.

Trajectories come as

- an ``.npz`` file in the export's segment layout (``preflab export``): ``obs`` (N, T, ·),
  ``acts`` (N, T, ·), ``lengths`` (N,), optionally ``true_rewards`` (N, T) and ``states``
  (N, T, S), one trajectory per row; or an export directory holding ``segments.npz``;
- a Minari dataset directory (its ``data`` folder, or the folder holding it; read with
  ``minari``, nothing downloaded): each episode is a trajectory, its ``infos["state"]`` (when
  recorded) the simulator states that render its clips.

Clips are rendered from the simulator states when the trajectories carry them and the env is
named (``--env-id``, or the Minari dataset's env spec, or the export's ``segments.parquet``; an
``--env-id`` other than the one the trajectories name is refused); without states the studio
says that the clips are unavailable.
"""

from __future__ import annotations

import dataclasses
import json
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from gymnasium import spaces

from preflab.aggregate.protocol import Feedback
from preflab.assemble import make_run_aggregator, to_device
from preflab.config import TrainConfig
from preflab.device import resolve_device
from preflab.errors import ConfigError, DataError
from preflab.export.feedback import export_env_ids
from preflab.kinds import PAIR
from preflab.policy.evaluate import reward_agreement
from preflab.records import Label, Query, Segment
from preflab.reward.batch import LabelBatch, SegmentBatch
from preflab.reward.modelfiles import REWARD_DIR
from preflab.reward.models import make_reward_model
from preflab.reward.trainer import RewardTrainer
from preflab.rundir.folders import check_output_dir
from preflab.rundir.output import RunOutput
from preflab.seeding import make_rng
from preflab.sources.studio_bridge import StudioBridge
from preflab.store import FeedbackStore

MARKER = "labelling.json"
"""The file that makes a run directory a labelling run (its source and counts)."""


@dataclass(frozen=True)
class Trajectory:
    """One trajectory as read: observations, actions, rewards (zeros when unknown), states."""

    obs: np.ndarray
    """(T, ·) observations, the one after the last action left out."""
    acts: np.ndarray
    """(T, act_dim) actions (one-hot for discrete actions)."""
    rewards: np.ndarray
    """(T,) the env's rewards, zeros when the trajectories carry none."""
    states: np.ndarray | None
    """(T, S) simulator states before each step, or None."""


@dataclass(frozen=True)
class LabellingRun:
    """What :func:`start_labelling` made."""

    run_dir: Path
    env_id: str
    n_trajectories: int
    n_segments: int
    n_pairs: int
    renders: bool
    """Whether the segments carry simulator states (the studio can render clips)."""


@dataclass(frozen=True)
class FitResult:
    """What :func:`fit_labelled` did."""

    n_labels: int
    val_loss: float
    reward_accuracy: float
    """Share of random segment pairs ordered like the trajectories' own rewards (NaN when they
    carry none)."""
    reward_dir: Path


def read_trajectories(path: str | Path) -> tuple[list[Trajectory], str]:
    """The trajectories in ``path`` and the env id they name ('' when none): see the module
    docstring for the layouts."""
    p = Path(path)
    if not p.exists():
        raise ConfigError(f"{p} does not exist; pass an .npz file, an export or a Minari dataset")
    if p.is_dir() and (p / "segments.npz").is_file():
        p = p / "segments.npz"
    if p.is_file() and p.suffix == ".npz":
        return _read_npz(p), _export_env_id(p)
    for data in (p, p / "data"):
        if (data / "metadata.json").is_file():
            return _read_minari(data)
    raise ConfigError(
        f"{p} is neither an .npz file in the export's segment layout, an export directory "
        "(with segments.npz) nor a Minari dataset (a folder with metadata.json)"
    )


def _export_env_id(npz: Path) -> str:
    """The env id an export names for its segments when ``npz`` is its segments.npz (one env
    id), else ''."""
    ids = export_env_ids(npz.parent) if npz.name == "segments.npz" else []
    return ids[0] if len(ids) == 1 else ""


def check_env_id(source: str | Path, named: str, given: str) -> str:
    """The env the trajectories in ``source`` come from: the one they name (``named``, '' for
    none), else ``given`` (``--env-id``, '' for none). A ``given`` env that differs from the
    named one is refused, naming both: clips would be rendered in the wrong env."""
    if given and named and given != named:
        raise ConfigError(
            f"--env-id {given} does not match the trajectories: {source} comes from {named}; "
            f"drop --env-id (the trajectories' own env is used) or pass --env-id {named}"
        )
    return named or given


NPZ_LAYOUT: dict[str, tuple[range, str]] = {
    "obs": (range(3, 9), "(N, T, ·)"),
    "acts": (range(2, 4), "(N, T, ·)"),
    "lengths": (range(1, 2), "(N,)"),
    "true_rewards": (range(2, 3), "(N, T)"),
    "states": (range(3, 4), "(N, T, S)"),
}
"""The export's segment layout: each array's numbers of dimensions allowed and its shape (N
trajectories of at most T steps, as ``obs`` has them)."""


def _check_npz(path: Path, arrays: dict[str, np.ndarray]) -> None:
    """Each array of ``path`` holds numbers and has its shape in :data:`NPZ_LAYOUT` (N and T
    those of ``obs``): a DataError names the file and the array."""
    n_t = arrays["obs"].shape[:2]
    for name, a in arrays.items():  # obs first: n_t is (N, T) once obs passes
        ndims, shape = NPZ_LAYOUT[name]
        expected = f"expected {name} {shape} as `preflab export` writes segments.npz"
        if a.dtype.kind not in "biuf":
            raise DataError(
                f"{path}: {name} holds {a.dtype} values, not numbers; {expected}: convert it "
                "to a numeric dtype"
            )
        if a.ndim not in ndims or a.shape[: min(a.ndim, 2)] != n_t[: min(a.ndim, 2)]:
            raise DataError(
                f"{path}: {name} has shape {a.shape} (obs {arrays['obs'].shape}); {expected}, "
                "N trajectories of T steps as in obs"
            )


def _read_npz(path: Path) -> list[Trajectory]:
    keys = ("obs", "acts", "lengths", "true_rewards", "states")
    try:
        with np.load(path, allow_pickle=False) as z:
            arrays = {k: z[k] for k in keys if k in z.files}
    except (zipfile.BadZipFile, ValueError, OSError, EOFError):
        raise ConfigError(
            f"{path} is not a valid .npz (expected a numpy .npz archive with obs, acts and "
            "lengths as `preflab export` writes segments.npz; this one is truncated, damaged or "
            "another kind of file): export the run again or pass another file"
        ) from None
    missing = [k for k in ("obs", "acts", "lengths") if k not in arrays]
    if missing:
        raise DataError(
            f"{path} lacks {missing}; expected obs (N, T, ·), acts (N, T, ·) and lengths (N,) "
            "as `preflab export` writes segments.npz"
        )
    _check_npz(path, arrays)
    obs, acts, lengths = arrays["obs"], arrays["acts"], arrays["lengths"].astype(int)
    rew = arrays.get("true_rewards")
    states = arrays.get("states")
    out = []
    for i, n in enumerate(lengths):
        if not 0 < n <= obs.shape[1]:
            raise DataError(f"{path}: lengths[{i}] = {n} is not in 1..{obs.shape[1]}")
        a = acts[i, :n]
        out.append(
            Trajectory(
                obs=obs[i, :n],
                acts=a[:, None] if a.ndim == 1 else a,
                rewards=np.zeros(n, np.float32) if rew is None else rew[i, :n],
                states=None if states is None else states[i, :n],
            )
        )
    return out


def _read_minari(data: Path) -> tuple[list[Trajectory], str]:
    ds, episodes = _load_minari(data)
    env_id = ds.env_spec.id if ds.env_spec is not None else ""
    act_space = ds.action_space
    out = []
    for ep in episodes:
        obs = np.asarray(ep.observations)
        if obs.dtype == object or not isinstance(ep.observations, np.ndarray):
            raise DataError(
                f"{data}: episode {ep.id} has dict or tuple observations; flatten them first"
            )
        n = len(ep.actions)
        acts = np.asarray(ep.actions)
        if isinstance(act_space, spaces.Discrete):
            acts = np.eye(int(act_space.n), dtype=np.float32)[acts.astype(int)]
        state = (ep.infos or {}).get("state")
        out.append(
            Trajectory(
                obs=obs[:n],
                acts=acts.reshape(n, -1),
                rewards=np.asarray(ep.rewards, np.float32),
                states=None if state is None else np.asarray(state, np.float64)[:n],
            )
        )
    return out, env_id


def _load_minari(data: Path) -> tuple[Any, list[Any]]:
    """The Minari dataset in ``data`` and its episodes; a dataset minari cannot read is a
    DataError naming the folder (and its metadata.json when that is not a JSON object)."""
    try:
        import minari
    except ImportError as exc:  # an optional extra
        raise ConfigError(
            "reading a Minari dataset needs the minari package: pip install 'preflab[track]' "
            "(or bash scripts/setup.sh)"
        ) from exc
    _check_minari_metadata(data / "metadata.json")
    try:
        ds = minari.MinariDataset(data)
        return ds, list(ds.iterate_episodes())
    except Exception as exc:  # minari fails with assertions, attribute, key and arrow errors
        why = ": ".join(x for x in (type(exc).__name__, str(exc)) if x)
        raise DataError(
            f"{data} is not a Minari dataset that minari can read ({why}); expected the folder "
            "minari writes (metadata.json with dataset_id, env_spec and the spaces, one folder "
            "per episode): write the dataset again with minari"
        ) from exc


def _check_minari_metadata(meta: Path) -> None:
    """A DataError naming ``meta`` when it is not UTF-8 text holding a JSON object."""
    from preflab.rundir.textfiles import read_text_file

    text = read_text_file(meta, what="Minari metadata")
    try:
        is_object = isinstance(json.loads(text), dict)
    except json.JSONDecodeError:
        is_object = False
    if not is_object:
        raise DataError(
            f"{meta} is not a JSON object; a Minari dataset's metadata.json holds one (its "
            "dataset_id, env_spec and spaces): write the dataset again with minari"
        )


def cut_segments(trajs: list[Trajectory], length: int, env_id: str) -> list[Segment]:
    """Non-overlapping segments of ``length`` steps from each trajectory (a shorter tail is
    left out), with content ids as the recorder gives them."""
    if length < 1:
        raise ConfigError(f"segment length must be at least 1, got {length}")
    out = []
    for e, t in enumerate(trajs):
        for start in range(0, len(t.obs) - length + 1, length):
            o = np.ascontiguousarray(t.obs[start : start + length])
            a = np.ascontiguousarray(t.acts[start : start + length], np.float32)
            out.append(
                Segment(
                    id=Segment.content_id(o, a),
                    obs=o,
                    acts=a,
                    true_rewards=t.rewards[start : start + length],
                    env_id=env_id,
                    episode=e,
                    start=start,
                    states=None if t.states is None else t.states[start : start + length],
                )
            )
    return list({s.id: s for s in out}.values())  # a repeated stretch is one segment


def start_labelling(
    source: str | Path, run_dir: str | Path, config: TrainConfig, *, pairs: int, env_id: str = ""
) -> LabellingRun:
    """Make a labelling run in ``run_dir`` (new) from the trajectories in ``source``; ``config``
    gives the segment length, seed and reward model (its env_id when neither the source nor
    ``env_id`` names one). ``env_id``: the env the caller says the trajectories come from
    (``--env-id``); refused when the source names another (:func:`check_env_id`)."""
    run = check_output_dir(run_dir, what="run directory")
    resolve_device(config.device)  # a GPU that torch cannot use: refused before any file
    if run.exists() and any(run.iterdir()):
        raise ConfigError(f"{run} is not empty; choose a new directory for the labelling run")
    trajs, named = read_trajectories(source)
    env_id = check_env_id(source, named, env_id) or config.env_id
    segs = cut_segments(trajs, config.segment_length, env_id)
    if len(segs) < 2:
        raise DataError(
            f"{source} gives {len(segs)} segment(s) of {config.segment_length} steps; at least "
            "2 are needed to compare: use a shorter --segment-length"
        )
    rng = make_rng(config.seed)
    n_pairs = min(pairs, len(segs) * (len(segs) - 1) // 2)
    chosen: set[tuple[int, int]] = set()
    while len(chosen) < n_pairs:
        i, j = (int(x) for x in rng.choice(len(segs), 2, replace=False))
        chosen.add((min(i, j), max(i, j)))
    queries = [
        Query(id=f"q-label-{k:05d}", kind=PAIR.name, a=(segs[i].id,), b=(segs[j].id,), round=0)
        for k, (i, j) in enumerate(sorted(chosen, key=lambda _: rng.random()))
    ]
    config = dataclasses.replace(
        config, env_id=env_id, source="store", total_labels=n_pairs, initial_label_frac=1.0
    )
    run.mkdir(parents=True, exist_ok=True)
    RunOutput(run).start(config.to_json())
    store = FeedbackStore(run / "feedback.db", array_dir=run / "segments")
    try:
        store.segments.add(segs)
        store.queries.add(queries)
        StudioBridge(store).publish_pool(0, segs, None)
        store.rounds.publish(
            0,
            env_id=env_id,
            env_steps=sum(len(t.obs) for t in trajs),
            total_steps=sum(len(t.obs) for t in trajs),
            metrics={"n_labels": 0, "n_judgements": 0},
            status="waiting",
        )
    finally:
        store.close()
    renders = all(s.states is not None for s in segs) and bool(env_id)
    info = {
        "trajectories": str(Path(source).resolve()),
        "n_trajectories": len(trajs),
        "n_segments": len(segs),
        "n_pairs": n_pairs,
        "renders": renders,
    }
    (run / MARKER).write_text(json.dumps(info, indent=2))
    return LabellingRun(run, env_id, len(trajs), len(segs), n_pairs, renders)


def fit_labelled(
    run_dir: str | Path, *, epochs: int | None = None, device: str | None = None
) -> FitResult:
    """Fit the labelling run's reward ensemble on the answers stored so far and write it to
    ``RUN_DIR/reward_model/`` (CPU tensors); the fit runs on ``device`` (default: the run's
    config's, see :func:`preflab.device.resolve_device`)."""
    run, config, feedback = read_labelled(run_dir)
    resolve_device(config.device if device is None else device)  # before any work
    labels = make_run_aggregator(config).labels(feedback)
    if not labels:
        raise DataError(
            f"{run} has no answers with a preference yet; people answer in the studio "
            f"(`preflab studio {run}`), then fit again"
        )
    return fit_reward(config, feedback, labels, run / REWARD_DIR, epochs=epochs, device=device)


def read_labelled(run_dir: str | Path) -> tuple[Path, TrainConfig, Feedback]:
    """A labelling run's directory, config and feedback (its queries, the answers that count and
    their segments); a ConfigError for a directory that is not a labelling run."""
    run = Path(run_dir)
    if not (run / MARKER).is_file():
        raise ConfigError(
            f"{run} is not a labelling run (no {MARKER}); make one with `preflab label "
            "TRAJECTORIES --run-dir DIR` (a training run fits its reward itself)"
        )
    config = TrainConfig.load(run / "config.json")
    store = FeedbackStore(run / "feedback.db", array_dir=run / "segments")
    try:
        return run, config, _feedback(store)
    finally:
        store.close()


def fit_reward(
    config: TrainConfig,
    feedback: Feedback,
    labels: list[Label],
    out: Path,
    *,
    epochs: int | None = None,
    device: str | None = None,
) -> FitResult:
    """A reward ensemble fitted on ``labels`` over ``feedback``'s segments (the run's reward
    and fit settings and seed), written to ``out`` (CPU tensors); the fit runs on ``device``
    (default: the config's)."""
    dev = resolve_device(config.device if device is None else device)
    segs = list(feedback.segments.values())
    batch = SegmentBatch.from_segments(segs)
    lb = LabelBatch.from_labels(labels, batch.index())
    obs_space: spaces.Box = (
        spaces.Box(0, 255, segs[0].obs.shape[1:], np.uint8)
        if segs[0].obs.dtype == np.uint8
        else spaces.Box(-np.inf, np.inf, segs[0].obs.shape[1:], np.float32)
    )
    act_space = spaces.Box(-np.inf, np.inf, segs[0].acts.shape[1:], np.float32)
    rng = make_rng(config.seed)
    model = to_device(make_reward_model(obs_space, act_space, config.reward, seed=config.seed), dev)
    report = RewardTrainer(model, config.fit).fit(
        batch, lb, rng, epochs=epochs or config.first_fit_epochs
    )
    model.fit_reward_stats(batch)
    truth = np.array([s.true_return for s in segs])
    acc = (
        reward_agreement(model, batch, truth, np.random.default_rng(config.seed))[0]
        if np.any(truth != 0)
        else float("nan")
    )
    model.save(out)
    return FitResult(
        n_labels=len(labels),
        val_loss=float(np.mean(report.val_loss)),
        reward_accuracy=acc,
        reward_dir=out,
    )


def _feedback(store: FeedbackStore) -> Feedback:
    """Everything the run's aggregator reads: the queries, the answers that count, segments."""
    queries = {q.id: q for q in store.queries.all()}
    judgements = store.answers.counted([j for _s, j in store.answers.judgements()])
    ids = sorted({sid for q in queries.values() for sid in (*q.a, *q.b)})
    segments = {s.id: s for s in store.segments.get(ids)}
    return Feedback(queries=queries, judgements=judgements, ratings=[], segments=segments)
