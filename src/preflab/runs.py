"""Runs from the outside: start, resume, branch or load a run directory.

These are the entry points a user (and the CLI, sweeps and benchmarks) calls: each checks the run
directory and the config, has :func:`preflab.assemble.assemble` build the parts, and hands them to
a :class:`preflab.loop.PreferenceLoop`. :func:`load_run` builds only what inference needs.
"""

from __future__ import annotations

import dataclasses
import json
import shutil
from pathlib import Path
from typing import Any

from stable_baselines3.common.base_class import BaseAlgorithm

from preflab.aggregate import Aggregator
from preflab.assemble import EnvOrModel, assemble, inference_parts
from preflab.checks import check_run
from preflab.config import TrainConfig
from preflab.envs import EnvSpec
from preflab.errors import ConfigError
from preflab.loop import PreferenceLoop, ProgressFn, RunResult, last_finite
from preflab.output import RunOutput
from preflab.runstate import Checkpointer
from preflab.selection import Selector
from preflab.sources.base import FeedbackSource
from preflab.store import strip_password


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
    """A new run, checked before anything is written (:func:`preflab.checks.check_run`); a start
    that fails leaves no half-made run directory behind."""
    run_dir = Path(run_dir)
    if (run_dir / "config.json").exists():
        raise ConfigError(
            f"{run_dir} already holds a run; continue it with `preflab train --resume {run_dir}` "
            "or choose a new directory"
        )
    check_run(config, None if isinstance(env, BaseAlgorithm) else env)
    created = not run_dir.exists()
    try:
        parts = assemble(
            config, run_dir, env=env, source=source, selector=selector, aggregator=aggregator
        )
        loop = PreferenceLoop(config, run_dir, parts, progress=progress)
        if config.task:  # what annotators see above the clips (the owner may change it)
            parts.store.set_setting("task", config.task)
        return loop
    except BaseException:
        RunOutput(run_dir).discard_if_unstarted(created=created)
        raise


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
    (see :func:`check_resume_config` for ``config``)."""
    asked = config
    config = check_resume_config(run_dir, config)
    parts = assemble(
        config, run_dir, env=env, source=source, selector=selector, aggregator=aggregator
    )
    loop = PreferenceLoop(config, run_dir, parts, progress=progress, resume=True)
    if asked is not None and asked.task:  # a new --task on resume replaces the shown one
        parts.store.set_setting("task", asked.task)
    return loop


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
    check_run_dir(src)
    if dst.exists():
        raise ConfigError(f"{dst} exists already; choose a new run directory")
    shutil.copytree(src, dst)
    (dst / "config.json").write_text(config.to_json())
    parts = assemble(config, dst, source=source, selector=selector, aggregator=aggregator)
    return PreferenceLoop(config, dst, parts, progress=progress, resume=True)


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


def check_run_dir(run_dir: str | Path) -> TrainConfig:
    """The config of the run in ``run_dir``; a one-line error when it is not a run directory."""
    d = Path(run_dir)
    if not d.exists():
        raise ConfigError(f"{d} does not exist; pass the directory of a run started before")
    if not d.is_dir():
        raise ConfigError(f"{d} is a file; pass the directory of a run (it holds config.json)")
    if not (d / "config.json").is_file():
        raise ConfigError(
            f"{d} is not a PrefLab run directory (no config.json); pass a directory made by "
            "`preflab train`, or start a new run there without --resume"
        )
    return TrainConfig.load(d / "config.json")


RESUMABLE_FIELDS = ("wait_for_labels_s", "torch_threads", "max_minutes", "task")
"""Settings a resumed run may change: they do not change what the run computes."""


def check_resume_config(run_dir: str | Path, config: TrainConfig | None) -> TrainConfig:
    """The config to resume ``run_dir`` with: the saved one, or ``config`` when it differs from it
    only in :data:`RESUMABLE_FIELDS` (anything else would change the run, and is refused)."""
    saved = check_run_dir(run_dir)
    if config is None:
        return saved
    asked = dataclasses.replace(config, store_url=strip_password(config.store_url))
    changed = [
        f.name
        for f in dataclasses.fields(TrainConfig)
        if getattr(asked, f.name) != getattr(saved, f.name) and f.name not in RESUMABLE_FIELDS
    ]
    if changed:
        raise ConfigError(
            "a resumed run continues as it was configured; these settings would change it: "
            f"{', '.join('--' + n.replace('_', '-') for n in changed)}. Drop them, or start "
            f"a new run (only {', '.join(RESUMABLE_FIELDS)} may change on resume)"
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


def load_run(run_dir: str | Path, *, env: EnvSpec | None = None) -> RunResult:
    """A finished (or stopped) run's agent and reward model, for inference, with its summary.

    Reads the run directory and changes nothing in it: no store is opened, no learned-reward env
    stack is built and no global state (torch threads, seeds) is touched. The env (``env``, or
    the config's ``env_id``) is made once, only for its spaces."""
    config = check_run_dir(run_dir)
    d = Path(run_dir)
    ckpt = Checkpointer(d).load()
    if ckpt.state.get("fresh", True):
        raise ConfigError(
            f"{d} has no trained round yet (its checkpoint is the fresh start); resume it with "
            "`preflab train --resume` and load it when a round has finished"
        )
    agent, model = inference_parts(config, ckpt, env=env)
    loop = ckpt.state["loop"]
    history: list[dict[str, Any]] = loop["history"]
    try:
        summary = json.loads((d / "summary.json").read_text())
    except (OSError, ValueError):
        summary = {}
    nan = float("nan")
    return RunResult(
        run_dir=d,
        env_id=config.env_id,
        algo=config.algo,
        seed=config.seed,
        true_return=summary.get("true_return") or nan,
        true_return_std=summary.get("true_return_std") or nan,
        n_labels=int(loop["n_labels"]),
        n_judgements=int(history[-1].get("n_judgements", 0)) if history else 0,
        reward_accuracy=last_finite(history, "reward_accuracy"),
        reward_corr=last_finite(history, "reward_corr"),
        env_steps=int(history[-1].get("env_steps", 0)) if history else 0,
        wall_s=float(loop["wall_s"]),
        eval_s=summary.get("eval_s") or nan,
        rounds=int(loop["round"]),
        ended_by=str(summary.get("ended_by", "steps")),
        agent=agent,
        reward_model=model,
    )
