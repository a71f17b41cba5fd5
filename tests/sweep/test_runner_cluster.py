"""A sweep on a two-node Ray cluster started on this machine (``ray start --head`` plus a worker
on loopback): trials placed by their declared resources on both nodes, results identical to the
sequential runner with the same seeds; requests no node can meet are refused before any trial."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from preflab.cli.main import main
from preflab.sweep.runner import ray_available
from tests.ray_cluster import two_node_cluster

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        not ray_available(), reason="ray is not installed (pip install preflab[sweep])"
    ),
]
TINY = ["--preset", "smoke", "--axis", "seed=0,1,2,3", "--set", "total_steps=400"]
TINY += ["--set", "eval_episodes=1", "--name", "two"]


def _rows(d: Path) -> list[dict[str, str]]:
    with (d / "results.csv").open() as f:
        return list(csv.DictReader(f))


def test_a_sweep_on_two_nodes_matches_the_sequential_one(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    seq = tmp_path / "seq"
    assert main(["sweep", *TINY, "--sequential", "--out", str(seq)]) == 0
    shared = tmp_path / "shared"
    shared.mkdir()
    with two_node_cluster(cpus_per_node=1) as address:
        for extra, message in (
            (["--cpus-per-trial", "2"], "no node of the Ray cluster can run a trial asking 2 CPU"),
            (["--gpus-per-trial", "0.5"], "asking 1 CPU and 0.5 GPU"),
        ):
            base = ["sweep", *TINY, "--address", address, "--out", str(tmp_path / "no")]
            assert main([*base, *extra]) == 1
            assert message in capsys.readouterr().err
            assert not (tmp_path / "no" / "trials").exists() or not any(
                (tmp_path / "no" / "trials").iterdir()
            )
        cmd = ["sweep", *TINY, "--address", address, "--storage", str(shared)]
        assert main([*cmd, "--cpus-per-trial", "1", "--gpus-per-trial", "0"]) == 0
    ray_dir = shared / "two"
    a, b = _rows(seq), _rows(ray_dir)
    assert [(r["trial"], r["status"]) for r in b] == [(r["trial"], "done") for r in a]
    assert [r["true_return"] for r in a] == [r["true_return"] for r in b]  # same seeds, same runs
    placement = json.loads((ray_dir / "placement.json").read_text())
    nodes = placement["nodes"]
    worker = next(nid for nid, n in nodes.items() if n.get("worker_node"))
    trials = placement["trials"]
    assert len(nodes) == 2 and len(trials) == 4
    assert {t["declared"]["num_cpus"] for t in trials.values()} == {1.0}
    assert {t["declared"]["num_gpus"] for t in trials.values()} == {0.0}
    used = {t["node"] for t in trials.values()}
    # one CPU per node and a one-CPU request: two trials at a time, one on each node
    assert used == set(nodes) and worker in used
    assert all((ray_dir / "trials" / name / "summary.json").is_file() for name in trials)
