"""benchmarks/run_queue.py ``run --engine ray`` end to end on a two-node Ray cluster started on
this machine (head plus a worker on loopback): each invocation is a Ray task declaring one CPU,
Ray places them on both nodes, each runs the frozen commit's code (first on ``PYTHONPATH``), a run
is done when its row is in the run log, and the time limit and the done rule behave as with
today's local workers.

The frozen commit here is a small exported ``src`` whose ``preflab.cli.main`` appends the row a
bench would (so the test writes nothing to benchmarks/results); the queue, Ray and the processes
are the real ones."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from preflab.sweep.runner import ray_available
from tests.bench.test_queue_ray import queue
from tests.ray_cluster import two_node_cluster

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        not ray_available(), reason="ray is not installed (pip install preflab[sweep])"
    ),
]
CODE = "e" * 40
STAND_IN = """import json, os, shlex, sys, time
args = sys.argv[1:]
seed = int(args[args.index("--seed") + 1])
time.sleep(600 if seed == 3 else 3)  # seed 3 outlasts the invocation limit
row = {"command": "preflab " + shlex.join(args), "path0": os.environ["PYTHONPATH"].split(":")[0]}
with open(args[args.index("--log") + 1], "a") as f:
    f.write(json.dumps(row) + "\\n")
"""


def test_the_queue_on_a_two_node_ray_cluster(tmp_path: Path) -> None:
    code_dir, state, log = tmp_path / "code", tmp_path / "state", tmp_path / "runs.jsonl"
    cli = code_dir / CODE / "src" / "preflab" / "cli"
    cli.mkdir(parents=True)
    (cli.parent / "__init__.py").write_text("")
    (cli / "__init__.py").write_text("")
    (cli / "main.py").write_text(STAND_IN)
    toml = tmp_path / "queue.toml"
    toml.write_text(
        f'[[job]]\nplan = "p"\ncode = "{CODE}"\nlog = "{log}"\n'
        f'command = "preflab stand-in --log {log} --seed {{seed}}"\n'
        "grid = { seed = [1, 2, 4, 3] }\n"
    )
    args = ["run", "--queue", str(toml), "--state-dir", str(state), "--code-dir", str(code_dir)]
    args += ["--engine", "ray", "--cpus-per-run", "1", "--workers", "2", "--minutes", "0.3"]
    args += ["--max-invocations", "1"]
    with two_node_cluster(cpus_per_node=1) as address:
        queue.main([*args, "--address", address])
        rows = [json.loads(line) for line in log.read_text().splitlines()]
        assert sorted(r["command"].split()[-1] for r in rows) == ["1", "2", "4"]
        assert {r["path0"] for r in rows} == {str(code_dir / CODE / "src")}  # the frozen code
        lines = (state / "log").read_text().splitlines()
        assert any("ray: 2 node(s), each run asks 1 CPU and 0 GPU" in x for x in lines)
        nodes = {x.rsplit(" ", 1)[1] for x in lines if " ran on ray node " in x}
        assert len(nodes) == 2  # one CPU per node, two runs at a time: both nodes used
        assert sum("invocation 1 time limit" in x for x in lines) == 1
        assert any("left unfinished after 1 invocations" in x and "--seed 3" in x for x in lines)
        assert not list(state.glob("ray-*/*.pgid"))  # every process group was ended
        # the done rule: a second queue run makes only what has no row
        queue.main([*args, "--address", address, "--minutes", "0.05"])
        again = (state / "log").read_text().splitlines()[len(lines) :]
        assert any("1 runs to make" in x for x in again)
    assert os.path.getsize(log) > 0
