"""Run a sweep's trials: on Ray (each trial declaring its CPUs and GPUs, on a local instance or a
cluster) or one after another.

Each trial is an ordinary run directory (``<sweep>/trials/<name>``) made by
:func:`preflab.runs.train`, so it can be inspected or resumed alone. Running a sweep again
skips finished trials (``summary.json`` present) and resumes killed ones from their
checkpoints; a trial that failed is retried from its checkpoint too.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import tempfile
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from preflab.errors import ConfigError
from preflab.rundir.folders import check_output_dir
from preflab.sweep.resources import TrialResources, check_address
from preflab.sweep.spec import SweepSpec, Trial

log = logging.getLogger(__name__)

Mode = Literal["auto", "ray", "sequential"]
ProgressFn = Callable[["SweepProgress"], None]


@dataclass
class SweepProgress:
    """Counts shown by the progress bar."""

    total: int
    done: int = 0
    running: int = 0
    failed: int = 0
    skipped: int = 0


@dataclass(frozen=True, kw_only=True)
class TrialOutcome:
    """What one trial produced."""

    name: str
    status: Literal["done", "skipped", "failed"]
    """'skipped' = finished in an earlier invocation."""
    summary: dict[str, Any] = field(default_factory=dict)
    error: str = ""
    wall_s: float = 0.0
    cpu_s: float = 0.0
    """CPU time of the process running the trial, during the trial."""
    node: str = ""
    """The Ray node the trial ran on (empty when sequential or skipped)."""


def ray_available() -> bool:
    try:
        import ray  # noqa: F401
    except ImportError:
        return False
    return True


def finished(run_dir: Path) -> bool:
    """Whether the trial in ``run_dir`` finished in an earlier invocation (its ``summary.json``
    is there): :func:`run_trial` skips it."""
    return (run_dir / "summary.json").is_file()


def run_trial(config_json: str, run_dir: str, torch_threads: int = 1) -> dict[str, Any]:
    """Run (or resume, or skip) one trial in ``run_dir``; never raises. Runs in a Ray worker
    or in this process. Returns a plain dict (name, status, summary, error, wall_s)."""
    d = Path(run_dir)
    t0 = time.perf_counter()
    c0 = time.process_time()
    out: dict[str, Any] = {"name": d.name, "summary": {}, "error": ""}
    if finished(d):
        try:
            summary = json.loads((d / "summary.json").read_text())
            if isinstance(summary, dict):
                return out | {"summary": summary, "status": "skipped"}
        except (OSError, ValueError):
            pass
        # half-written or no object: run the trial again
        (d / "summary.json").unlink(missing_ok=True)
    os.environ.setdefault("OMP_NUM_THREADS", str(torch_threads))
    try:
        import torch

        from preflab.config import TrainConfig
        from preflab.runs import resume, train

        torch.set_num_threads(torch_threads)
        config = TrainConfig.from_json(config_json)
        (d / "error.txt").unlink(missing_ok=True)
        if (d / "config.json").is_file() and (d / "checkpoints" / "LATEST").is_file():
            saved = TrainConfig.load(d / "config.json")
            if _without_password(saved) != _without_password(config):
                raise ConfigError(
                    f"trial {d} was started with another config; move it away or use a new "
                    "sweep directory"
                )
            result = resume(d)
        else:
            if d.exists():  # killed before its first checkpoint: start it again
                shutil.rmtree(d)
            result = train(config, run_dir=d)
        out["summary"] = result.summary()
        out["status"] = "done"
    except BaseException as exc:  # a trial's failure must not end the sweep
        if isinstance(exc, KeyboardInterrupt | SystemExit):
            raise
        out["status"] = "failed"
        out["error"] = f"{type(exc).__name__}: {exc}"
        d.mkdir(parents=True, exist_ok=True)
        (d / "error.txt").write_text(out["error"] + "\n\n" + traceback.format_exc())
    out["wall_s"] = time.perf_counter() - t0
    out["cpu_s"] = time.process_time() - c0
    return out


def _without_password(config: Any) -> Any:
    import dataclasses

    from preflab.store import strip_password

    return dataclasses.replace(config, store_url=strip_password(config.store_url))


def prepare(spec: SweepSpec, sweep_dir: Path) -> list[Trial]:
    """Create the sweep directory (or check it holds this sweep) and list the trials."""
    check_output_dir(sweep_dir, what="sweep directory").mkdir(parents=True, exist_ok=True)
    saved = sweep_dir / "sweep.json"
    if saved.is_file():
        try:
            old = SweepSpec.from_mapping(json.loads(saved.read_text()))
        except (ValueError, ConfigError) as exc:
            raise ConfigError(f"{saved} is not a sweep spec ({exc}); use a new directory") from exc
        if old.to_json() != spec.to_json():
            raise ConfigError(
                f"{sweep_dir} holds another sweep ({old.name}); a sweep resumes only with the "
                "same spec. Use a new --out directory, or the spec in sweep.json"
            )
    else:
        saved.write_text(spec.to_json())
    (sweep_dir / "trials").mkdir(exist_ok=True)
    return spec.trials()


def check_trials(trials: list[Trial]) -> None:
    """Refuse the sweep before any trial starts when one of them cannot run."""
    from preflab.config.checks import check_run

    for t in trials:
        try:
            check_run(t.config)
        except ConfigError as exc:
            raise ConfigError(f"trial {t.name}: {exc}") from exc


def run_sweep(
    spec: SweepSpec,
    sweep_dir: str | Path,
    *,
    mode: Mode = "auto",
    address: str = "",
    num_cpus: int = 0,
    resources: TrialResources | None = None,
    progress: ProgressFn | None = None,
    check: bool = True,
) -> list[TrialOutcome]:
    """Run every trial of ``spec`` under ``sweep_dir`` and write the report; returns the
    outcomes in grid order. ``mode='auto'`` uses Ray when it is installed; on Ray each trial
    declares ``resources`` (default one CPU, no GPU) and ``placement.json`` records where each
    ran."""
    from preflab.sweep.report import write_report

    d = Path(sweep_dir)
    address = check_address(address)
    res = resources or TrialResources()
    if mode == "sequential" and (address or resources is not None):
        raise ConfigError(
            "--address, --cpus-per-trial and --gpus-per-trial are Ray's; drop them or --sequential"
        )
    if check:
        check_trials(spec.trials())
    wants_ray = mode == "ray" or bool(address) or resources is not None
    if wants_ray and not ray_available():  # before anything is written
        raise ConfigError(
            "Ray is not installed (needed for --ray, --address, --cpus-per-trial and "
            "--gpus-per-trial); `pip install 'preflab[sweep]'` or run with --sequential"
        )
    trials = prepare(spec, d)
    use_ray = mode == "ray" or (mode == "auto" and ray_available())
    prog = SweepProgress(total=len(trials))
    report = progress or (lambda _p: None)
    if use_ray:
        outcomes = _run_ray(
            trials, d, address=address, num_cpus=num_cpus, res=res, prog=prog, cb=report
        )
    else:
        outcomes = _run_sequential(trials, d, prog=prog, cb=report)
    write_report(spec, d)
    return outcomes


def _count(prog: SweepProgress, o: dict[str, Any]) -> None:
    if o["status"] == "failed":
        prog.failed += 1
    else:
        prog.done += 1
        prog.skipped += o["status"] == "skipped"


def _outcome(o: dict[str, Any]) -> TrialOutcome:
    return TrialOutcome(
        name=o["name"],
        status=o["status"],
        summary=o.get("summary") or {},
        error=o.get("error", ""),
        wall_s=float(o.get("wall_s", 0.0)),
        cpu_s=float(o.get("cpu_s", 0.0)),
        node=str(o.get("node", "")),
    )


def _run_sequential(
    trials: list[Trial], d: Path, *, prog: SweepProgress, cb: ProgressFn
) -> list[TrialOutcome]:
    out = []
    cb(prog)
    for t in trials:
        prog.running = 1
        cb(prog)
        o = run_trial(t.config.to_json(), str(d / "trials" / t.name), t.config.torch_threads)
        prog.running = 0
        _count(prog, o)
        cb(prog)
        out.append(_outcome(o))
    return out


def ray_trial(
    config_json: str, run_dir: str, torch_threads: int, resources: dict[str, float]
) -> dict[str, Any]:
    """:func:`run_trial` in a Ray worker, plus the node it ran on and what it declared."""
    import ray

    out = run_trial(config_json, run_dir, torch_threads)
    ctx = ray.get_runtime_context()
    gpu_ids = [str(g) for g in ctx.get_accelerator_ids().get("GPU", [])]
    return out | {"node": ctx.get_node_id(), "declared": resources, "gpu_ids": gpu_ids}


def _sees(path: str, token: str) -> bool:
    """On one node: whether the driver's probe file is there with its token."""
    try:
        return Path(path).read_text() == token
    except OSError:
        return False


def check_shared(d: Path, nodes: list[dict[str, Any]]) -> None:
    """Every live node must see the sweep directory (the driver writes a probe file, a zero-CPU
    task pinned to each node reads it): trials write their run directories there."""
    import secrets

    import ray
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    probe = (d / ".storage-probe").resolve()
    token = secrets.token_hex(8)
    probe.write_text(token)
    try:
        task = ray.remote(num_cpus=0, max_retries=0)(_sees)
        refs = {
            n["NodeID"]: task.options(
                scheduling_strategy=NodeAffinitySchedulingStrategy(n["NodeID"], soft=False)
            ).remote(str(probe), token)
            for n in nodes
        }
        blind = [
            f"{nid[:12]} ({next(n['NodeManagerAddress'] for n in nodes if n['NodeID'] == nid)})"
            for nid, ref in refs.items()
            if not ray.get(ref, timeout=120)
        ]
    finally:
        probe.unlink(missing_ok=True)
    if blind:
        raise ConfigError(
            f"Ray node(s) {', '.join(blind)} do not see {d.resolve()}; put the sweep on a "
            "folder every node mounts at the same path (--storage /shared/path)"
        )


def _run_ray(
    trials: list[Trial],
    d: Path,
    *,
    address: str,
    num_cpus: int,
    res: TrialResources,
    prog: SweepProgress,
    cb: ProgressFn,
) -> list[TrialOutcome]:
    import ray

    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    temp = ""
    started = False
    if not ray.is_initialized():
        kwargs: dict[str, Any] = {
            "include_dashboard": False,
            "logging_level": logging.WARNING,
            "log_to_driver": False,
        }
        if address:
            kwargs["address"] = address
        else:
            # socket paths must stay short: a temp dir under /tmp, removed afterwards
            temp = tempfile.mkdtemp(prefix="preflab-ray-", dir="/tmp")
            kwargs["_temp_dir"] = temp
            kwargs["num_cpus"] = num_cpus or os.cpu_count() or 1
        try:
            ray.init(**kwargs)
        except Exception as exc:
            if temp:
                shutil.rmtree(temp, ignore_errors=True)
            raise ConfigError(f"cannot start or reach Ray ({address or 'local'}): {exc}") from exc
        started = True
    try:
        nodes = [n for n in ray.nodes() if n.get("Alive")]
        res.check_fits([n.get("Resources", {}) for n in nodes])
        check_shared(d, nodes)
        slots = res.slots(ray.cluster_resources())
        declared = {"num_cpus": res.cpus, "num_gpus": res.gpus}
        remote = ray.remote(ray_trial).options(**res.ray_options())
        results: dict[str, dict[str, Any]] = {}
        todo = list(trials)
        pending: dict[Any, Trial] = {}
        cb(prog)
        while todo or pending:
            while todo and len(pending) < slots:
                t = todo.pop(0)
                run_dir = str((d / "trials" / t.name).resolve())
                ref = remote.remote(t.config.to_json(), run_dir, res.torch_threads, declared)
                pending[ref] = t
            prog.running = len(pending)
            cb(prog)
            ready, _ = ray.wait(list(pending), num_returns=1)
            for ref in ready:
                t = pending.pop(ref)
                try:
                    o = ray.get(ref)
                except Exception as exc:  # the worker died (OOM, killed)
                    o = {"name": t.name, "status": "failed", "error": f"worker died: {exc}"}
                results[t.name] = o
                _count(prog, o)
        prog.running = 0
        cb(prog)
        _write_placement(d, trials, results, nodes)
        return [_outcome(results[t.name]) for t in trials]
    finally:
        if started:
            ray.shutdown()
        if temp:
            shutil.rmtree(temp, ignore_errors=True)


def _write_placement(
    d: Path, trials: list[Trial], results: dict[str, dict[str, Any]], nodes: list[dict[str, Any]]
) -> None:
    """``placement.json``: the cluster's nodes and, per trial, the node it ran on, the
    resources it declared and the GPUs Ray gave it (this invocation's trials only)."""
    doc = {
        "nodes": {
            n["NodeID"]: {"address": n.get("NodeManagerAddress", ""), **n.get("Resources", {})}
            for n in nodes
        },
        "trials": {
            t.name: {
                "status": results[t.name].get("status", ""),
                "node": results[t.name].get("node", ""),
                "declared": results[t.name].get("declared", {}),
                "gpu_ids": results[t.name].get("gpu_ids", []),
            }
            for t in trials
        },
    }
    (d / "placement.json").write_text(json.dumps(doc, indent=2, sort_keys=True) + "\n")
