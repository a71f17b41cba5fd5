"""``preflab sweep``'s progress bar: a re-run's skipped trials are not counted as done now."""

from __future__ import annotations

from pathlib import Path

import pytest

from preflab.cli import sweep as sweep_cli
from preflab.sweep import SweepProgress
from preflab.sweep.runner import finished
from tests.cli.test_train_cli import _Clock, _shown_rate


def test_progress_rate_counts_only_the_trials_this_process_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import tqdm.std

    trials = tmp_path / "trials"
    for k in range(4):  # trials 0 and 2 finished in an earlier invocation
        (trials / f"t{k}").mkdir(parents=True)
    for k in (0, 2):
        (trials / f"t{k}" / "summary.json").write_text("{}")
    n_finished = sum(finished(trials / f"t{k}") for k in range(4))
    assert n_finished == 2

    clock = _Clock()
    monkeypatch.setattr(tqdm.std, "time", clock)
    bar = sweep_cli._Progress(6, n_finished, "demo")
    p = SweepProgress(total=6)
    bar.update(p)
    p.done = p.skipped = 1  # trial 0 skipped at once
    bar.update(p)
    assert bar.bar.n == 2  # counted from the start, not again
    clock.t += 10.0
    p.done = 2  # trial 1 ran for 10 s
    bar.update(p)
    p.done, p.skipped = 3, 2  # trial 2 skipped at once
    bar.update(p)
    assert bar.bar.n == 3
    assert _shown_rate(bar.bar) == pytest.approx(0.1)
    clock.t += 10.0
    p.failed = 1  # trial 3 failed after 10 s
    bar.update(p)
    assert bar.bar.n == 4 and _shown_rate(bar.bar) == pytest.approx(0.1)
    bar.close()


@pytest.mark.parametrize(
    ("spec", "argv", "names"),
    [
        (False, ["--axis", "seed=0,1", "--set", "seed=5"], ["--set seed=5", "--axis seed=0,1"]),
        (True, ["--set", "seed=5"], ["--set seed=5", "the axis seed of"]),
    ],
)
def test_a_set_on_an_axis_is_refused_naming_the_key(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    spec: bool,
    argv: list[str],
    names: list[str],
) -> None:
    """``--set NAME=V`` with an axis NAME (``--axis`` or the spec file's): the axis would win
    and the --set value be dropped without a word."""
    from preflab.cli.main import main

    first = ["--preset", "smoke"]
    if spec:
        path = tmp_path / "spec.toml"
        path.write_text('name = "s"\npreset = "smoke"\n[axes]\nseed = [0, 1]\n')
        first = [str(path)]
    out = tmp_path / "sw"
    assert main(["sweep", *first, "--sequential", *argv, "--out", str(out)]) == 1
    err = capsys.readouterr().err
    assert err.startswith("preflab sweep: error:") and "Traceback" not in err
    assert "'seed'" in err and "keep one of them" in err, err
    assert all(n in err for n in names), err
    assert not out.exists()
