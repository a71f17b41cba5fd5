"""``preflab sweep SPEC.toml [--out DIR]``: run a grid of training runs (Ray when installed).

Axes can come from the command line instead of (or on top of) a spec file:
``preflab sweep --preset smoke --axis total_labels=50,100 --axis seed=0,1,2 --set algo=ppo``.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from tqdm import tqdm

from preflab.errors import ConfigError
from preflab.rundir.folders import check_output_dir
from preflab.sweep import SweepProgress, SweepSpec, parse_axis, run_sweep
from preflab.sweep.resources import TrialResources, check_address, storage_dir
from preflab.sweep.runner import Mode, check_trials, finished


def build_spec(args: argparse.Namespace) -> SweepSpec:
    data: dict[str, Any] = {}
    if args.spec:
        data = json.loads(SweepSpec.load(args.spec).to_json())
    data.setdefault("base", {})
    data.setdefault("axes", {})
    if args.name:
        data["name"] = args.name
    if args.preset:
        data["preset"] = args.preset
    if args.x:
        data["x"] = args.x
    file_axes = {k: f"the axis {k} of {args.spec}" for k in data["axes"]}
    sets: dict[str, str] = {}
    for text in args.set:
        k, vals = parse_axis(text)
        if len(vals) != 1:
            raise ConfigError(f"--set expects NAME=VALUE, got {text!r}")
        data["base"][k] = vals[0]
        sets[k] = text
    axes: dict[str, str] = {}
    for text in args.axis:
        k, vals = parse_axis(text)
        data["axes"][k] = vals
        data["base"].pop(k, None)  # over a spec file's [base] value
        axes[k] = f"--axis {text}"
    _refuse_set_on_axes(sets, file_axes | axes)
    if not data["axes"]:
        raise ConfigError("give a sweep spec file (SPEC.toml) or at least one --axis NAME=V1,V2")
    return SweepSpec.from_mapping(data)


def _refuse_set_on_axes(sets: dict[str, str], axes: dict[str, str]) -> None:
    """Refuse a ``--set NAME=VALUE`` (``sets``: name → its text) whose NAME is also an axis
    (``axes``: name → where the axis comes from): the axis would vary it in every trial and the
    --set value would be dropped without a word."""
    both = [f"--set {sets[k]} and {axes[k]}" for k in sets if k in axes]
    if both:
        names = ", ".join(repr(k) for k in sets if k in axes)
        raise ConfigError(
            f"{'; '.join(both)} both give {names}: an axis varies a setting across the trials, "
            "--set fixes it in every trial; keep one of them"
        )


class _Progress:
    """The trials bar. It starts at the trials finished in an earlier invocation (``finished``:
    this one skips them), so its rate and time left count only the trials this process runs: a
    bar started at 0 counted a re-run's skipped trials as done in no time."""

    def __init__(self, total: int, finished: int, name: str) -> None:
        self.finished = finished
        self.bar = tqdm(
            total=total, initial=finished, unit="trial", desc=f"sweep {name}", dynamic_ncols=True
        )

    def update(self, p: SweepProgress) -> None:
        """Move to the trials ended so far: the finished ones, plus those run and failed now."""
        n = min(p.total, self.finished + p.done - p.skipped + p.failed)
        self.bar.update(max(0, n - self.bar.n))
        self.bar.set_postfix(done=p.done, running=p.running, failed=p.failed)

    def close(self) -> None:
        self.bar.close()


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(prog="preflab sweep", description=__doc__)
    ap.add_argument("spec", nargs="?", default="", help="TOML sweep spec ([base], [axes])")
    ap.add_argument("--out", default="", help="sweep directory (default sweeps/NAME)")
    ap.add_argument("--axis", action="append", default=[], help="NAME=V1,V2,... (repeatable)")
    ap.add_argument("--set", action="append", default=[], help="NAME=VALUE in every trial")
    ap.add_argument("--name", default="", help="sweep name")
    ap.add_argument("--preset", default="", choices=["", "default", "smoke"])
    ap.add_argument("--x", default="", help="axis on the plot's x axis")
    mode = ap.add_mutually_exclusive_group()
    mode.add_argument("--sequential", action="store_true", help="one trial after another, no Ray")
    mode.add_argument("--ray", action="store_true", help="require Ray (error when missing)")
    ap.add_argument("--address", default="", help="Ray cluster address (default: start locally)")
    ap.add_argument("--num-cpus", type=int, default=0, help="local Ray CPUs (default: all)")
    ap.add_argument(
        "--cpus-per-trial", type=float, default=None, help="CPUs each trial declares (default 1)"
    )
    ap.add_argument(
        "--gpus-per-trial",
        type=float,
        default=None,
        help="GPUs each trial declares: 0 (default), a fraction to share a GPU, or whole GPUs",
    )
    ap.add_argument(
        "--storage",
        default="",
        help="shared folder every Ray node mounts at the same path; the sweep goes to "
        "STORAGE/NAME (instead of --out)",
    )
    args = ap.parse_args(argv)
    if args.num_cpus < 0:
        raise ConfigError(f"--num-cpus must be ≥ 0, got {args.num_cpus}")
    args.address = check_address(args.address)
    if args.num_cpus and args.address:
        raise ConfigError(
            "--num-cpus sizes a local Ray instance; a cluster (--address) has its own"
        )
    resources = None
    if args.cpus_per_trial is not None or args.gpus_per_trial is not None:
        resources = TrialResources(
            cpus=1.0 if args.cpus_per_trial is None else args.cpus_per_trial,
            gpus=0.0 if args.gpus_per_trial is None else args.gpus_per_trial,
        )
    if args.sequential and (args.address or resources or args.storage):
        raise ConfigError(
            "--address, --cpus-per-trial, --gpus-per-trial and --storage are for Ray; drop them "
            "or drop --sequential"
        )
    if args.storage and args.out:
        raise ConfigError("give --out or --storage (the sweep goes to STORAGE/NAME), not both")
    spec = build_spec(args)
    out = check_output_dir(
        storage_dir(args.storage, spec.name) if args.storage else args.out or f"sweeps/{spec.name}",
        what="--storage" if args.storage else "--out",
    )
    trials = spec.trials()
    check_trials(trials)  # every trial can run: refuse before anything starts
    n = len(trials)
    bar = _Progress(n, sum(finished(out / "trials" / t.name) for t in trials), spec.name)
    mode_name: Mode = "sequential" if args.sequential else "ray" if args.ray else "auto"
    outcomes = run_sweep(
        spec,
        out,
        mode=mode_name,
        address=args.address,
        num_cpus=args.num_cpus,
        resources=resources,
        progress=bar.update,
        check=False,
    )
    bar.close()
    failed = [o for o in outcomes if o.status == "failed"]
    print(f"{out}/results.md, results.csv, true_return.png ({n - len(failed)} of {n} trials done)")
    for o in failed:
        print(f"failed: {o.name}: {o.error.splitlines()[0] if o.error else '?'}")
    return 1 if failed else 0
