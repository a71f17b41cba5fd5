"""Runs from the outside: start, resume, branch or load a run directory.

These are the entry points a user (and the CLI, sweeps and benchmarks) calls: each checks the run
directory and the config, has :func:`preflab.assemble.assemble` build the parts, and hands them to
a :class:`preflab.loop.PreferenceLoop`. :func:`load_run` builds only what inference needs.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import shutil
import weakref
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from stable_baselines3.common.base_class import BaseAlgorithm

from preflab.aggregate import Aggregator
from preflab.assemble import (
    EnvOrModel,
    agent_hyper,
    assemble,
    inference_parts,
    record_run_hyperparams,
)
from preflab.config import TrainConfig
from preflab.config.checks import check_run
from preflab.device import resolve_device
from preflab.envs import EnvSpec
from preflab.errors import ConfigError
from preflab.loop import PreferenceLoop, ProgressFn, RunParts, RunResult, last_finite
from preflab.loop.snapshot import checkpoint_phase, fresh_checkpoint
from preflab.rundir.folders import check_output_dir, made_folder
from preflab.runs.labelling import MARKER as LABELLING_MARKER
from preflab.runstate import Checkpointer, identity
from preflab.runstate.lock import RunLock, check_not_running
from preflab.selection.selectors import Selector
from preflab.sources.base import FeedbackSource
from preflab.store import FeedbackStore, strip_password

log = logging.getLogger(__name__)


def start_loop(
    config: TrainConfig,
    run_dir: str | Path,
    *,
    env: EnvOrModel | None = None,
    source: FeedbackSource | None = None,
    selector: Selector | None = None,
    aggregator: Aggregator | None = None,
    progress: ProgressFn | None = None,
) -> PreferenceLoop:
    """A new run, checked before anything is written (:func:`preflab.config.checks.check_run`); a start
    that fails leaves no half-made run directory behind (nor the parent folders it made)."""
    run_dir = check_output_dir(run_dir, what="run directory")
    if (run_dir / "config.json").exists():
        check_not_running(run_dir)  # a live run: say who trains it
        raise ConfigError(
            f"{run_dir} already holds a run; continue it with `preflab train --resume {run_dir}` "
            "or choose a new directory"
        )
    check_run(config, None if isinstance(env, BaseAlgorithm) else env)
    agent_hyper(config)  # a PPO batch that does not divide the rollout: refused here
    threads = torch.get_num_threads()
    with made_folder(run_dir, what="run directory"):
        lock = RunLock(run_dir)
        lock.acquire()
        parts: RunParts | None = None
        try:
            parts = assemble(
                config, run_dir, env=env, source=source, selector=selector, aggregator=aggregator
            )
            loop = LockedLoop(config, run_dir, parts, progress=progress)
            record_run_hyperparams(config, run_dir, parts.agent, env)
            if config.task:  # what annotators see above the clips (the owner may change it)
                parts.store.settings.set("task", config.task)
            identity.save(run_dir, _record(config, env=env, source=parts.source, own=source))
            _hold(loop, lock, threads)
        except BaseException:
            _give_up(lock, threads, parts)
            raise
    return loop


def open_loop(
    run_dir: str | Path,
    *,
    config: TrainConfig | None = None,
    env: EnvOrModel | None = None,
    source: FeedbackSource | None = None,
    selector: Selector | None = None,
    aggregator: Aggregator | None = None,
    progress: ProgressFn | None = None,
) -> PreferenceLoop:
    """The stopped run in ``run_dir``, restored from its last checkpoint and ready to continue
    (see :func:`check_resume_config` for ``config``). Everything that can be checked by reading
    is checked before the run's lock is taken, and a resume refused after it (e.g. a checkpoint
    that does not fit the config) lets go of it as it was: a refused resume leaves the run
    directory byte for byte as it found it. A run killed before its first checkpoint
    (:func:`stopped_before_start`) starts from the beginning with its recorded config."""
    asked = config
    config = check_resume_config(run_dir, config)
    saved = check_run_dir(run_dir)
    record = identity.load(run_dir)
    check_resume_parts(run_dir, record, config, env=env, source=source)
    check_resumable(run_dir, config)
    again = stopped_before_start(run_dir)
    threads = torch.get_num_threads()
    lock = RunLock(run_dir)
    lock.acquire()
    parts: RunParts | None = None
    try:
        parts = assemble(
            config,
            run_dir,
            env=env,
            source=source,
            selector=selector,
            aggregator=aggregator,
            new_store=False,  # a lost store is refused, not replaced by an empty one
        )
        if again:
            _start_again(Path(run_dir), config, parts.store)
        loop = LockedLoop(config, run_dir, parts, progress=progress, resume=True)
        record_run_hyperparams(config, run_dir, parts.agent, env)
        # at the fresh start with no record of it: killed before its start's last steps (below)
        unrecorded = record is None and loop.state.round == 0 and not loop.phase
        if config.task and (asked is not None or unrecorded):  # a new --task replaces the shown one
            parts.store.settings.set("task", config.task)
        grown = budget_increases(saved, config)
        if grown:
            _extend(Path(run_dir), saved, config, record, grown)
        if unrecorded:
            identity.save(run_dir, _record(config, env=env, source=parts.source, own=source))
        _hold(loop, lock, threads)
        return loop
    except BaseException:
        _give_up(lock, threads, parts)
        raise


def stopped_before_start(run_dir: str | Path) -> bool:
    """Whether the run in ``run_dir`` was stopped (killed) before its first checkpoint, the fresh
    start its loop writes once it is built: its config.json (and store) are there, but neither a
    checkpoint nor the record of its start (``checkpoints/run.json``, saved after that
    checkpoint). Such a run did nothing yet."""
    return not Checkpointer(run_dir).written() and not identity.path(run_dir).exists()


def _start_again(run_dir: Path, config: TrainConfig, store: FeedbackStore) -> None:
    """Resuming a run :func:`stopped_before_start`: it starts from the beginning, its fresh
    checkpoint written now (as its start would have), unless its store holds feedback, which
    a run started over would neither see nor keep apart from its own: refused."""
    held = {
        "segments": store.segments.count(),
        "queries": store.queries.count(),
        "judgements": store.answers.count(),
        "ratings": store.ratings.count(),
    }
    if any(held.values()):
        what = ", ".join(f"{kind} ({n})" for kind, n in held.items() if n)
        raise ConfigError(
            f"{run_dir} was stopped before its first checkpoint, yet its store holds {what}; "
            "starting the run over would mix them with new ones. Keep them (`preflab export "
            f"{run_dir}` writes them out) and start a new run in another directory"
        )
    log.info("%s was stopped before its first checkpoint; it starts from the beginning", run_dir)
    Checkpointer(run_dir).save(0, fresh_checkpoint(config))


def check_resumable(run_dir: str | Path, config: TrainConfig) -> None:
    """What a resume checks by reading only, before the run's lock is taken or a file written:
    no live process trains the run, and the agent's arguments are sound. The checkpoint is read
    (once) by the loop under the lock; one it refuses is undone by :func:`_give_up`."""
    check_not_running(run_dir)
    agent_hyper(config)


def branch_run(
    from_dir: str | Path,
    run_dir: str | Path,
    config: TrainConfig,
    *,
    source: FeedbackSource | None = None,
    selector: Selector | None = None,
    aggregator: Aggregator | None = None,
    progress: ProgressFn | None = None,
) -> PreferenceLoop:
    """A new run in ``run_dir`` that continues from the last checkpoint of the run in
    ``from_dir`` (agent, replay buffer, optimisers, envs, store: all copied) under ``config``,
    which may change the budgets (e.g. ``total_steps``); the checkpoint must fit it (same env,
    agent and reward network). ``from_dir`` is left as it is, so several branches can continue
    from the same point."""
    src, dst = Path(from_dir), Path(run_dir)
    resolve_device(config.device)  # before anything is copied
    check_run_dir(src)
    if stopped_before_start(src):
        raise ConfigError(
            f"{src} was stopped before its first checkpoint, so there is nothing to branch from; "
            f"start a new run in {dst} instead (or resume {src} first)"
        )
    if dst.exists():
        raise ConfigError(f"{dst} exists already; choose a new run directory")
    check_output_dir(dst, what="run directory")
    check_not_running(src)  # a live run's files change while they are copied
    agent_hyper(config)
    threads = torch.get_num_threads()
    with made_folder(dst, what="run directory"):  # a branch that fails leaves no copy behind
        shutil.copytree(src, dst, ignore=shutil.ignore_patterns("run.lock"), dirs_exist_ok=True)
        (dst / "config.json").write_text(config.to_json())
        lock = RunLock(dst)
        lock.acquire()
        parts: RunParts | None = None
        try:
            parts = assemble(config, dst, source=source, selector=selector, aggregator=aggregator)
            loop = LockedLoop(config, dst, parts, progress=progress, resume=True)
            record_run_hyperparams(config, dst, parts.agent, None)
            identity.save(dst, _record(config, env=None, source=parts.source, own=source))
            _hold(loop, lock, threads)
        except BaseException:
            _give_up(lock, threads, parts)
            raise
    return loop


def train(
    config: TrainConfig,
    *,
    run_dir: str | Path,
    env: EnvOrModel | None = None,
    source: FeedbackSource | None = None,
    selector: Selector | None = None,
    aggregator: Aggregator | None = None,
    progress: ProgressFn | None = None,
) -> RunResult:
    """Run a preference-learning loop in ``run_dir`` (created) and return its result.

    ``env`` is optional: by default ``config.env_id`` is built; pass a function that builds a
    gymnasium env (wrapped or custom envs) or an existing SB3 model to continue training it.
    """
    loop = start_loop(
        config,
        run_dir,
        env=env,
        source=source,
        selector=selector,
        aggregator=aggregator,
        progress=progress,
    )
    try:
        return loop.run()
    finally:
        loop.store.close()  # the run directory is left complete (no open SQLite WAL)
        release_run(loop)


def check_run_dir(run_dir: str | Path, *, resuming: bool = False) -> TrainConfig:
    """The config of the run in ``run_dir``; a one-line error when it is not a run directory
    (``resuming``: it also says how to start a new run there instead)."""
    d = Path(run_dir)
    if not d.exists():
        raise ConfigError(f"{d} does not exist; pass the directory of a run started before")
    if not d.is_dir():
        raise ConfigError(f"{d} is a file; pass the directory of a run (it holds config.json)")
    if not (d / "config.json").is_file():
        instead = ", or start a new run there without --resume" if resuming else ""
        raise ConfigError(
            f"{d} is not a PrefLab run directory (no config.json); pass a directory made by "
            f"`preflab train`{instead}"
        )
    if (d / LABELLING_MARKER).is_file():
        raise ConfigError(
            f"{d} is a labelling run (made by `preflab label`): it holds answers and a reward "
            "model, and no policy to train on, evaluate or record. Fit its reward model with "
            f"`preflab fit {d}`; load it with preflab.load_reward_model('{d}/reward_model')"
        )
    return TrainConfig.load(d / "config.json")


RESUMABLE_FIELDS = ("wait_for_labels_s", "torch_threads", "max_minutes", "task", "device")
"""Settings a resumed run may change: they do not change what the run does. ``torch_threads``
and ``device`` may change its floating-point results in the last bits (another thread count or
device sums in another order), so a resume is bit for bit an uninterrupted run's only when they
stay as they were."""


def check_resume_config(run_dir: str | Path, config: TrainConfig | None) -> TrainConfig:
    """The config to resume ``run_dir`` with: the saved one, or ``config`` when it differs from it
    only in :data:`RESUMABLE_FIELDS` (anything else would change the run, and is refused)."""
    saved = check_run_dir(run_dir, resuming=True)
    check_config_unedited(run_dir, saved)
    resolve_device((config or saved).device)  # before the run's lock or any file is touched
    if config is None:
        return saved
    asked = dataclasses.replace(config, store_url=strip_password(config.store_url))
    grown = budget_increases(saved, asked)
    changed = [
        f.name
        for f in dataclasses.fields(TrainConfig)
        if getattr(asked, f.name) != getattr(saved, f.name)
        and f.name not in RESUMABLE_FIELDS
        and f.name not in grown
    ]
    if changed:
        raise ConfigError(
            "a resumed run continues as it was configured; these settings would change it: "
            f"{', '.join('--' + n.replace('_', '-') for n in changed)}. Drop them, or start "
            f"a new run (only {', '.join(RESUMABLE_FIELDS)} may change on resume, and "
            "--total-steps / --total-labels may grow to extend the run)"
        )
    return config


def resume(
    run_dir: str | Path,
    *,
    config: TrainConfig | None = None,
    env: EnvOrModel | None = None,
    source: FeedbackSource | None = None,
    selector: Selector | None = None,
    aggregator: Aggregator | None = None,
    progress: ProgressFn | None = None,
) -> RunResult:
    """Continue a stopped run from its directory (config, store and checkpoints); see
    :func:`check_resume_config` for ``config``."""
    loop = open_loop(
        run_dir,
        config=config,
        env=env,
        source=source,
        selector=selector,
        aggregator=aggregator,
        progress=progress,
    )
    try:
        return loop.run()
    finally:
        loop.store.close()
        release_run(loop)


def load_run(run_dir: str | Path, *, env: EnvSpec | None = None, device: str = "auto") -> RunResult:
    """A finished (or stopped) run's agent and reward model, for inference, with its summary.

    Reads the run directory and changes nothing in it: no store is opened, no learned-reward env
    stack is built and no global state (torch threads, seeds) is touched. The env (``env``, or
    the config's ``env_id``) is made once, only for its spaces. ``device``: where the agent and
    reward model are put ('auto', 'cpu', 'cuda', 'cuda:N'; checkpoints are device-free, so a
    run trained on a GPU loads on a CPU and the other way round)."""
    resolve_device(device)
    config = check_run_dir(run_dir)
    d = Path(run_dir)
    check_config_unedited(d, config)  # the checkpoint was trained with the recorded config
    if env is None:
        _check_env_given(d, identity.load(d), config, "load")
    ckpt = None if stopped_before_start(d) else Checkpointer(d).load()
    if ckpt is None or ckpt.state.get("fresh", True) or checkpoint_phase(ckpt, d):
        where = (
            "it was stopped before its first checkpoint"
            if ckpt is None
            else "its checkpoint is the fresh start"
            if ckpt.state.get("fresh", True)
            else "its checkpoint is round 0's pre-training"
        )
        raise ConfigError(
            f"{d} has no trained round yet ({where}); resume it with "
            "`preflab train --resume` and load it when a round has finished"
        )
    agent, model = inference_parts(config, ckpt, env=env, device=device)
    loop = ckpt.state["loop"]
    history: list[dict[str, Any]] = loop["history"]
    summary = _read_summary(d)
    nan = float("nan")
    return RunResult(
        run_dir=d,
        env_id=config.env_id,
        algo=config.algo,
        seed=config.seed,
        true_return=summary.get("true_return") or nan,
        true_return_std=summary.get("true_return_std") or nan,
        success_rate=summary.get("success_rate"),
        n_labels=int(loop["n_labels"]),
        n_judgements=int(history[-1].get("n_judgements", 0)) if history else 0,
        reward_accuracy=last_finite(history, "reward_accuracy"),
        reward_corr=last_finite(history, "reward_corr"),
        env_steps=int(history[-1].get("env_steps", 0)) if history else 0,
        wall_s=float(loop["wall_s"]),
        eval_s=summary.get("eval_s") or nan,
        rounds=int(loop["round"]),
        n_equal=int(summary.get("n_equal", 0)),
        n_skipped=int(summary.get("n_skipped", 0)),
        ended_by=str(summary.get("ended_by", "steps")),
        agent=agent,
        reward_model=model,
    )


_SUMMARY_TYPES: dict[str, tuple[type, ...]] = {
    "true_return": (int, float, type(None)),
    "true_return_std": (int, float, type(None)),
    "success_rate": (int, float, type(None)),
    "eval_s": (int, float, type(None)),
    "n_equal": (int,),
    "n_skipped": (int,),
    "ended_by": (str,),
}
"""The ``summary.json`` numbers :func:`load_run` reports, with the JSON types they may have
(null: a non-finite number)."""


def _read_summary(run_dir: Path) -> dict[str, Any]:
    """``summary.json`` of ``run_dir``: ``{}`` when the run wrote none (it stopped before its
    end) or it cannot be read (logged, naming the file): it is only informative, the run loads
    without it."""
    path = run_dir / "summary.json"
    try:
        summary = json.loads(path.read_text())
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as exc:
        problem = str(exc)
    else:
        problem = _summary_problem(summary)
        if isinstance(summary, dict) and not problem:
            return summary
    log.warning(
        "%s cannot be read (%s); the run's summary numbers are left unknown. It is written "
        "when a run ends: restore it from a copy of the run, or measure the return again with "
        "`preflab eval %s`",
        path,
        problem,
        run_dir,
    )
    return {}


def _summary_problem(summary: object) -> str:
    """What is wrong with a parsed summary.json (``""``: nothing)."""
    if not isinstance(summary, dict):
        return f"expected a JSON object, got {type(summary).__name__}"
    wrong = [
        f"{k} = {summary[k]!r}"
        for k, types in _SUMMARY_TYPES.items()
        if k in summary and (isinstance(summary[k], bool) or not isinstance(summary[k], types))
    ]
    return f"wrong types: {', '.join(wrong)}" if wrong else ""


# ----- a run directory's safety: its lock, its recorded parts, an edited config, extension -----

BUDGETS = ("total_steps", "total_labels")
"""The settings a resume may raise (never lower): the run is extended."""


@dataclass(frozen=True)
class _Held:
    """What a loop made here holds until it lets go (:func:`release_run`)."""

    lock: RunLock
    """The run's lock."""
    torch_threads: int
    """torch's thread count before the run set its own (``torch_threads``), given back."""


_LOCKS: weakref.WeakKeyDictionary[PreferenceLoop, _Held] = weakref.WeakKeyDictionary()
"""What each loop made here holds (let go by :func:`release_run`; the lock also with the loop)."""


class LockedLoop(PreferenceLoop):
    """A loop made here: it lets go of its run's lock when :meth:`run` returns or raises (e.g.
    Ctrl-C), so the same process may resume the run afterwards."""

    def run(self) -> RunResult:
        try:
            return super().run()
        finally:
            release_run(self)


def _hold(loop: PreferenceLoop, lock: RunLock, torch_threads: int) -> None:
    _LOCKS[loop] = _Held(lock, torch_threads)
    weakref.finalize(loop, lock.release)


def _let_go(lock: RunLock, torch_threads: int) -> None:
    lock.release()
    torch.set_num_threads(torch_threads)


def _give_up(lock: RunLock, torch_threads: int, parts: RunParts | None) -> None:
    """After a start, resume or branch that failed before its loop ran: close what was opened
    (envs, store: no SQLite -wal/-shm left), put ``run.lock`` back as it was and give torch its
    thread count back."""
    if parts is not None:
        with contextlib.suppress(Exception):  # the failure that brought us here is raised
            parts.venv.close()
        with contextlib.suppress(Exception):
            parts.store.close()
    lock.abandon()
    torch.set_num_threads(torch_threads)


def release_run(loop: PreferenceLoop) -> None:
    """Let go of the run lock ``loop`` holds and give torch back the thread count it had before
    the run (``train`` and ``resume`` do it when the run ends, so a notebook's own torch work
    does not go on with the run's one thread; otherwise the lock goes with the loop, or at the
    latest when the process exits)."""
    held = _LOCKS.pop(loop, None)
    if held is not None:
        _let_go(held.lock, held.torch_threads)


def _env_kind(env: EnvOrModel | None, config: TrainConfig) -> str:
    if env is None or env == config.env_id:
        return "config"
    if isinstance(env, BaseAlgorithm):
        return "model"
    return "id" if isinstance(env, str) else "factory"


def _record(
    config: TrainConfig,
    *,
    env: EnvOrModel | None,
    source: FeedbackSource,
    own: FeedbackSource | None,
) -> dict[str, Any]:
    """What :mod:`preflab.runstate.identity` keeps of a run's start."""
    clean = dataclasses.replace(config, store_url=strip_password(config.store_url))
    return {
        "format": 1,
        "config": json.loads(clean.to_json()),
        "source": {
            "kind": config.source if own is None else "user",
            "class": identity.describe_part(source),
        },
        "env": {"kind": _env_kind(env, config), "env_id": config.env_id},
    }


def check_config_unedited(run_dir: str | Path, saved: TrainConfig) -> None:
    """Refuse a ``config.json`` edited after the run started (compared with the copy in
    ``checkpoints/run.json``), naming the edited fields: a resume (:func:`check_resume_config`)
    and a load for inference (:func:`load_run`: ``preflab eval``, ``preflab record``) use the
    config the checkpoints were trained with, or none."""
    record = identity.load(run_dir)
    if record is None or not isinstance(record.get("config"), dict):
        return  # a run made before the record existed
    started = record["config"]
    # through today's fields: one added since the run started has its default on both sides (a
    # record today's config cannot read, with a field removed since, is compared as stored)
    with contextlib.suppress(ConfigError, TypeError, ValueError):
        started = json.loads(TrainConfig.from_json(json.dumps(started)).to_json())
    edited = [
        (name, was, now)
        for name, was, now in identity.changed_fields(started, json.loads(saved.to_json()))
        if name.split(".")[0] not in RESUMABLE_FIELDS
    ]
    if edited:
        fields = ", ".join(f"{n} (started with {w!r}, now {v!r})" for n, w, v in edited)
        raise ConfigError(
            f"{Path(run_dir) / 'config.json'} was edited after the run started: {fields} "
            "(checkpoints/run.json keeps the config it started with, the one its checkpoints "
            "were trained with). A run is continued and evaluated as it started: put the values "
            "back. To extend its budgets use "
            f"`preflab train --resume {run_dir} --total-steps N` (or --total-labels N); to "
            "change anything else start a new run"
        )


def _check_env_given(
    run_dir: Path, record: dict[str, Any] | None, config: TrainConfig, verb: str
) -> None:
    kind = (record or {}).get("env", {}).get("kind")
    if kind not in ("factory", "id"):
        return
    what = "an env factory" if kind == "factory" else "an env id"
    call = f"preflab.{'load_run' if verb == 'load' else 'resume'}({str(run_dir)!r}, env=...)"
    raise ConfigError(
        f"{run_dir} was built from {what} passed from Python, not from its config's env_id "
        f"{config.env_id!r}, so it cannot be rebuilt from the run directory alone"
        + (" (`preflab train --resume` cannot do it)" if verb == "resume" else "")
        + f". Pass the same env: {call}"
    )


def check_resume_parts(
    run_dir: str | Path,
    record: dict[str, Any] | None,
    config: TrainConfig,
    *,
    env: EnvOrModel | None,
    source: FeedbackSource | None,
) -> None:
    """Refuse to resume with other parts than the run was started with: without the env or the
    feedback source a user passed from Python, or with a source of another kind."""
    d = Path(run_dir)
    if record is None:
        return
    if env is None:
        _check_env_given(d, record, config, "resume")
    was = record.get("source", {})
    if was.get("kind") == "user" and source is None:
        raise ConfigError(
            f"{d} was taught by a feedback source passed from Python ({was.get('class')}); "
            f"resuming without it would continue with the config's source {config.source!r} "
            "instead (`preflab train --resume` cannot pass it). Resume it from Python with the "
            f"same source: preflab.resume({str(d)!r}, source=...)"
        )
    if source is not None and was.get("class") not in (None, identity.describe_part(source)):
        raise ConfigError(
            f"{d} was taught by {was.get('class')}, not {identity.describe_part(source)}; resume "
            "it with the same kind of source, or start a new run for the new source"
        )


def budget_increases(saved: TrainConfig, config: TrainConfig) -> dict[str, tuple[int, int]]:
    """The budgets (:data:`BUDGETS`) ``config`` raises above ``saved``: ``{name: (was, now)}``."""
    return {
        n: (getattr(saved, n), getattr(config, n))
        for n in BUDGETS
        if getattr(config, n) > getattr(saved, n)
    }


def _extend(
    run_dir: Path,
    saved: TrainConfig,
    config: TrainConfig,
    record: dict[str, Any] | None,
    grown: dict[str, tuple[int, int]],
) -> None:
    """Write the raised budgets to ``config.json`` (and the record), so the run and later
    resumes go on to them."""
    raised: dict[str, Any] = {n: now for n, (_was, now) in grown.items()}
    extended = dataclasses.replace(saved, **raised)
    tmp = run_dir / ".config.json.tmp"
    tmp.write_text(extended.to_json())
    tmp.replace(run_dir / "config.json")
    if record is not None:
        identity.save(run_dir, record | {"config": json.loads(extended.to_json())})
    log.info(
        "extending the run in %s: %s",
        run_dir,
        ", ".join(f"--{n.replace('_', '-')} {was} -> {now}" for n, (was, now) in grown.items()),
    )
