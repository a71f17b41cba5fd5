"""benchmarks/run_queue.py's ``--engine ray`` without Ray: what each invocation declares, the
refusals before anything starts, the engine chosen, and the invocation it plans (the frozen
commit's ``src`` first on ``PYTHONPATH``), which both engines share."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
if "bench_queue" in sys.modules:
    queue = sys.modules["bench_queue"]
else:
    _spec = importlib.util.spec_from_file_location(
        "bench_queue", ROOT / "benchmarks" / "run_queue.py"
    )
    assert _spec and _spec.loader
    queue = importlib.util.module_from_spec(_spec)
    sys.modules["bench_queue"] = queue
    _spec.loader.exec_module(queue)


def _args(tmp_path: Path, *extra: str):  # type: ignore[no-untyped-def]
    """The ``run`` verb's namespace, as ``main`` parses it."""
    import argparse

    ap = argparse.ArgumentParser()
    ap.add_argument("--engine", default="local")
    ap.add_argument("--address", default="")
    ap.add_argument("--cpus-per-run", type=float, default=1.0)
    ap.add_argument("--gpus-per-run", type=float, default=0.0)
    args = ap.parse_args(list(extra))
    args.state_dir, args.code_dir, args.workers, args.minutes = tmp_path, tmp_path / "c", 2, 1.0
    return args


def test_queue_runs_carry_resource_requests_on_ray(tmp_path: Path) -> None:
    assert queue.ray_options(2.0, 0.5) == {"num_cpus": 2.0, "num_gpus": 0.5, "max_retries": 0}
    runs = [queue.Run(plan="p", code="c", log=tmp_path / "l.jsonl", command="preflab x 1")]
    args = _args(tmp_path, "--engine", "ray", "--cpus-per-run", "4", "--gpus-per-run", "0.25")
    q = queue.make_queue(runs, args)
    assert isinstance(q, queue.RayQueue) and q.pending == runs  # the same runs, done rule
    assert q.options == {"num_cpus": 4.0, "num_gpus": 0.25, "max_retries": 0}
    assert type(queue.make_queue(runs, _args(tmp_path))) is queue.Queue  # today's default


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--engine", "ray", "--gpus-per-run", "1.5"], "--gpus-per-run above 1 must be a whole"),
        (["--engine", "ray", "--cpus-per-run", "0"], "--cpus-per-run must be a number > 0"),
        (["--engine", "ray", "--address", "head"], "is not a Ray address"),
        (["--address", "10.0.0.1:6379"], "--address is for --engine ray"),
    ],
)
def test_bad_ray_options_stop_the_queue_before_any_run(
    tmp_path: Path, extra: list[str], message: str
) -> None:
    toml = tmp_path / "queue.toml"
    toml.write_text(
        '[[job]]\nplan = "p"\ncode = "c"\nlog = "l.jsonl"\ncommand = "preflab bench b"\n'
    )
    argv = ["run", "--queue", str(toml), "--state-dir", str(tmp_path / "state"), *extra]
    with pytest.raises(SystemExit, match=message):
        queue.main(argv)
    assert not (tmp_path / "state").exists()  # nothing started, no log line


def test_an_invocation_runs_the_frozen_commits_code(tmp_path: Path) -> None:
    code = "f" * 40
    (tmp_path / code / "src" / "preflab").mkdir(parents=True)  # an exported commit
    (tmp_path / code / "benchmarks" / "preflab_bench").mkdir(parents=True)
    run = queue.Run(plan="p", code=code, log=tmp_path / "l", command="preflab bench b --seeds 1")
    argv, env = queue.invocation(run, tmp_path)
    assert argv == [sys.executable, "-m", "preflab.cli.main", "bench", "b", "--seeds", "1"]
    paths = env["PYTHONPATH"].split(":")
    assert paths[:2] == [str(tmp_path / code / "src"), str(tmp_path / code / "benchmarks")]
