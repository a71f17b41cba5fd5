"""What a sweep trial declares to Ray, and the checks made before anything is submitted (no Ray
needed): the request's options, how many trials a cluster holds, a request no node can meet, the
address and the shared storage path, and the CLI's refusals."""

from __future__ import annotations

from pathlib import Path

import pytest

from preflab.cli.main import main
from preflab.errors import ConfigError
from preflab.sweep import runner
from preflab.sweep.resources import TrialResources, check_address, storage_dir

GRID = ["sweep", "--preset", "smoke", "--axis", "seed=0,1", "--name", "r"]


def test_sweep_trials_carry_resource_requests() -> None:
    res = TrialResources(cpus=2, gpus=0.25)
    assert res.ray_options() == {"num_cpus": 2, "num_gpus": 0.25, "max_retries": 0}
    assert res.torch_threads == 2 and TrialResources(cpus=0.5).torch_threads == 1
    assert TrialResources().ray_options() == {"num_cpus": 1.0, "num_gpus": 0.0, "max_retries": 0}
    # 8 CPUs / 2 = 4, 1 GPU / 0.25 = 4; with 0.5 GPU the GPU share limits: 2
    assert res.slots({"CPU": 8.0, "GPU": 1.0}) == 4
    assert TrialResources(cpus=1, gpus=0.5).slots({"CPU": 8.0, "GPU": 1.0}) == 2
    assert TrialResources(cpus=3).slots({"CPU": 2.0}) == 1  # never zero
    assert TrialResources(cpus=1 / 3).slots({"CPU": 1.0}) == 3  # float rounding kept


def test_a_request_no_node_can_meet_is_refused_naming_the_nodes() -> None:
    nodes = [{"CPU": 4.0}, {"CPU": 2.0, "GPU": 1.0}]
    TrialResources(cpus=2, gpus=1).check_fits(nodes)  # the second node holds it
    TrialResources(cpus=4).check_fits(nodes)
    # 4 CPUs and a GPU exist in the cluster, but not on one node
    with pytest.raises(ConfigError, match=r"4 CPU and 1 GPU \(nodes: 4 CPU/0 GPU, 2 CPU/1 GPU\)"):
        TrialResources(cpus=4, gpus=1).check_fits(nodes)
    with pytest.raises(ConfigError, match="no live node"):
        TrialResources().check_fits([])


@pytest.mark.parametrize(
    ("cpus", "gpus", "message"),
    [
        (0, 0, r"--cpus-per-trial must be a number > 0"),
        (float("nan"), 0, r"--cpus-per-trial must be a number > 0"),
        (1, -0.5, r"--gpus-per-trial must be ≥ 0"),
        (1, 1.5, r"above 1 must be a whole number of GPUs"),
    ],
)
def test_bad_requests_are_refused(cpus: float, gpus: float, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        TrialResources(cpus=cpus, gpus=gpus)


def test_addresses_and_storage_are_checked(tmp_path: Path) -> None:
    for ok in ("", "auto", "10.0.0.1:6379", "head.local:6379", "ray://10.0.0.1:10001"):
        assert check_address(ok) == ok
    for bad in ("10.0.0.1", "http://x:1", "a b:1"):
        with pytest.raises(ConfigError, match="is not a Ray address; expected HOST:PORT"):
            check_address(bad)
    assert storage_dir(tmp_path, "s1") == tmp_path / "s1"
    assert list(tmp_path.iterdir()) == []  # the write check leaves nothing
    with pytest.raises(ConfigError, match="must be an absolute path"):
        storage_dir("shared/sweeps", "s1")
    with pytest.raises(ConfigError, match="does not exist or is not a folder"):
        storage_dir(tmp_path / "not-mounted", "s1")


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--sequential", "--address", "10.0.0.1:6379"], "are for Ray; drop them"),
        (["--sequential", "--cpus-per-trial", "2"], "are for Ray; drop them"),
        (["--gpus-per-trial", "2.5"], "whole number of GPUs"),
        (["--address", "nowhere"], "is not a Ray address"),
        (["--address", "10.0.0.1:6379", "--num-cpus", "2"], "sizes a local Ray instance"),
        (["--storage", "rel/path"], "must be an absolute path"),
        (["--storage", "/", "--out", "x"], "not both"),
    ],
)
def test_the_cli_refuses_bad_ray_options_before_writing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], extra: list[str], message: str
) -> None:
    out = tmp_path / "sw"
    args = [*GRID, *extra] if "--out" in extra else [*GRID, "--out", str(out), *extra]
    if "--storage" in extra:
        args = [*GRID, *extra]
    assert main(args) == 1
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1  # one line, no traceback
    assert not out.exists()


def test_ray_options_without_ray_say_what_to_install(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(runner, "ray_available", lambda: False)
    out = tmp_path / "sw"
    assert main([*GRID, "--out", str(out), "--cpus-per-trial", "1"]) == 1
    assert "Ray is not installed" in capsys.readouterr().err
    assert not out.exists()
