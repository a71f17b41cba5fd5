"""Every ``preflab bench NAME`` at a tiny budget: its whole path runs and the table it writes has
the right shape.

``SMOKE`` gives each benchmark's tiny arguments (``{tmp}`` is the test's directory; every
output goes there, never into benchmarks/results) and the markdown files it must write. A new
benchmark without an entry fails :func:`test_every_bench_has_a_smoke_spec`: add one (or, when a
test of its own already runs the bench whole at a tiny budget, name that test in ``COVERED``).

Benchmarks that need something this machine may lack carry a documented marker instead of a
silent skip:

* ``needs_imitation`` (peer, pendulum): the imitation 1.0.1 virtualenv that
  ``preflab_bench.peer.ensure_imitation_venv`` builds (~70 s, 1.7 GB, network to PyPI). When
  ``.venv-imitation`` is absent the test is skipped with that reason; build it with
  ``python -c "from preflab_bench.peer import ensure_imitation_venv; ensure_imitation_venv()"``.
"""

from __future__ import annotations

import importlib
import json
import re
import types
from pathlib import Path

import pytest

from preflab.cli.bench import available
from preflab_bench.peer import DEFAULT_VENV, venv_python
from tests import warm_python

IMITATION = str(DEFAULT_VENV)
REPO = Path(__file__).resolve().parents[2]

SMOKE: dict[str, tuple[list[str], list[str]]] = {
    # name: (argv, markdown files written into {tmp})
    "restate": (
        [
            "--experiment",
            "mujoco-termination",
            "--out",
            "{tmp}/r.md",
            "--reps",
            "100",
            "--check-seeds",
            "0",
        ],
        ["r.md"],
    ),
    "bpref": (
        # a plan entry is named: an unplanned seed makes every row exploratory (no verdict).
        # 300 steps: feedback rounds at 200, 250 and 300 steps with 1, 4 and 6 labels, the same
        # three rounds as at 500 (250, 375, 500), here and in the efficiency smoke
        [
            "--plan",
            "bpref-walker-oracle",
            "--seeds",
            "0",
            "--steps",
            "300",
            "--labels",
            "6",
            "--initial-steps",
            "100",
            "--unsup-steps",
            "100",
            "--steps-per-round",
            "50",
            "--net-arch",
            "16",
            "--batch-size",
            "32",
            "--threads",
            "1",
            "--backend",  # SBX here (the efficiency smoke runs the same functions on SB3)
            "sbx",
            "--eval-episodes",
            "1",
            "--run-root",
            "{tmp}/runs",
            "--jsonl",
            "{tmp}/bpref_runs.jsonl",
            "--out",
            "{tmp}/bpref.md",
        ],
        ["bpref.md"],
    ),
    "efficiency": (
        [
            "--seeds",
            "0",
            "--arms",
            "plain",
            "all",
            "sac_true_reward",
            "--labels",
            "6",
            "--steps",
            "300",
            "--initial-steps",
            "100",
            "--unsup-steps",
            "100",
            "--steps-per-round",
            "50",
            "--net-arch",
            "16",
            "--batch-size",
            "32",
            "--threads",
            "1",
            "--eval-episodes",
            "1",
            "--run-root",
            "{tmp}/runs",
            "--jsonl",
            "{tmp}/efficiency_runs.jsonl",
            "--out",
            "{tmp}/efficiency.md",
        ],
        ["efficiency.md"],
    ),
    "routing": (
        [
            "--seeds",
            "0",
            "--labels",
            "6",
            "--steps",
            "500",
            "--initial-steps",
            "150",
            "--unsup-steps",
            "100",
            "--steps-per-round",
            "125",
            "--net-arch",
            "16",
            "--batch-size",
            "32",
            "--threads",
            "1",
            "--eval-episodes",
            "1",
            "--min-calibration",
            "2",
            "--target-error",
            "0.45",
            "--run-root",
            "{tmp}/runs",
            "--jsonl",
            "{tmp}/routing_runs.jsonl",
            "--out",
            "{tmp}/routing.md",
        ],
        ["routing.md"],
    ),
    "atari": (["--arm", "random", "--eval-episodes", "1", "--out-dir", "{tmp}"], ["atari.md"]),
    "atari_speed": (
        # one env: a chunk is one A2C rollout (5 steps), the warm-up five, so relabel+record's
        # SegmentRecorder cuts a 25-step segment (at 64 steps × 2 envs it cut six; the same path)
        [
            "--steps",
            "5",
            "--warmup-steps",
            "25",
            "--repeats",
            "1",
            "--n-envs",
            "1",
            "--forward-repeats",
            "1",
            "--out",
            "{tmp}/atari_speed.md",
        ],
        ["atari_speed.md"],
    ),
    "store_throughput": (
        [
            "--writers",
            "2",
            "--per-writer",
            "20",
            "--batch",
            "1",
            "--backends",
            "sqlite",
            "--read-judgements",
            "200",
            "--read-queries",
            "20",
            "--out",
            "{tmp}/store.md",
        ],
        ["store.md"],
    ),
    "studio_groupwise": (["--answers", "2", "--out", "{tmp}/sg.md"], ["sg.md"]),
    "overhead": (
        [
            "--arm",
            "ppo",
            "--seeds",
            "0",
            "--labels",
            "6",
            "--env-steps",
            "4096",
            "--runs",
            "{tmp}/overhead.jsonl",
            "--out",
            "{tmp}/overhead.md",
        ],
        ["overhead.md"],
    ),
    "sweep_speed": (["--steps", "400", "--out", "{tmp}/sweep_speed.md"], ["sweep_speed.md"]),
    "crowd_fig2": (["--smoke", "--out", "{tmp}"], ["crowd_fig2.md"]),
    "crowd_fig5": (["--smoke", "--out", "{tmp}"], ["crowd_fig5.md"]),
    "crowd_fig5_explain": (["--smoke", "--out", "{tmp}"], ["crowd_fig5_explained.md"]),
    "crowd_ppo": (
        [
            "--smoke",
            "--seeds",
            "0",
            "--arms",  # sml: tests/bench/test_crowd_ppo.py runs it, stopped and continued
            "majority",
            "oracle",
            "--run-root",
            "{tmp}/runs",
            "--jsonl",
            "{tmp}/crowd_ppo_runs.jsonl",
            "--out",
            "{tmp}/crowd_ppo.md",
        ],
        ["crowd_ppo.md"],
    ),
    "groupwise": (
        [
            "--quick",
            "--dms",
            "interactive",
            "--envs",
            "GridWorld",
            "--seeds",
            "0",
            "--learns-accuracy",
            "0",
            "--out",
            "{tmp}",
        ],
        ["groupwise.md"],
    ),
    "groupwise_labels": (
        [
            "--quick",
            "--envs",
            "GridWorld",
            "--seeds",
            "300",
            "--gaps",
            "0.15",
            "--sizes",
            "8",
            "--jsonl",
            "{tmp}/groupwise_labels_runs.jsonl",
            "--out",
            "{tmp}/groupwise_labels.md",
        ],
        ["groupwise_labels.md"],
    ),
    "groupwise_speed": (
        ["--sizes", "20", "--repeats", "1", "--env", "Pendulum-v1", "--out", "{tmp}"],
        ["groupwise_speed.md"],
    ),
    "llm_fig5": (
        [
            "--pairs",
            "200",
            "--epochs",
            "2",
            "--seeds",
            "1",
            "--out",
            "{tmp}/llm_fig5.md",
            "--jsonl",
            "{tmp}/llm_fig5_runs.jsonl",
        ],
        ["llm_fig5.md"],
    ),
    "llm_rank": (
        [
            "--envs",
            "PrefLab/NoLock-v0",
            "--accuracies",
            "0.8",
            "--queries",
            "1",
            "--seeds",
            "1",
            "--epochs",
            "2",
            "--jsonl",
            "{tmp}/llm_rank_runs.jsonl",
            "--out",
            "{tmp}/llm_rank.md",
        ],
        ["llm_rank.md"],
    ),
    "llm_local": (
        # one pair: one request to the model (~3 s of CPU each), then the warm rerun from the
        # cache and the report, as with two (whose answers, cut at 16 tokens, were unreadable too)
        [
            "--envs",
            "PrefLab/NoLock-v0",
            "--pairs",
            "1",
            "--queries",
            "1",
            "--max-tokens",
            "16",
            "--out",
            "{tmp}/llm_local.md",
            "--jsonl",
            "{tmp}/llm_local_runs.jsonl",
        ],
        ["llm_local.md"],
    ),
    "ai_judge": (
        # the stand-in server (no --base-url): two pairs of one env, small frames
        [
            "--envs",
            "walker",
            "--pairs",
            "2",
            "--frames",
            "2",
            "--image-size",
            "64",
            "--out",
            "{tmp}/aij.md",
        ],
        ["aij.md"],
    ),
    "llm_throughput": (
        [
            "--pairs",
            "8",
            "--queries",
            "1",
            "--latencies",
            "0.0",
            "--out",
            "{tmp}/llm_throughput.md",
        ],
        ["llm_throughput.md"],
    ),
    "main_job": (["--smoke", "--out", "{tmp}/main_job.md"], ["main_job.md"]),
    "mujoco": (
        [
            "--smoke",
            "--envs",  # one env: the others run the same path (their 6 runs were 2/3 of the time)
            "Hopper-v5",
            "--variants",
            "today",
            "absorbing",
            "--jsonl",
            "{tmp}/runs.jsonl",
            "--out",
            "{tmp}/mujoco.md",
        ],
        ["mujoco.md"],
    ),
    "peer": (
        [
            "--venv",
            IMITATION,
            "--seeds",
            "0",
            "--labels",
            "10",
            "--timesteps",
            "1000",
            "--eval-episodes",
            "1",
            "--iterations",
            "2",
            "--markdown",
            "{tmp}/peer.md",
        ],
        ["peer.md"],
    ),
    "packaging": (["--checkout", str(REPO), "--out", "{tmp}/packaging.md"], ["packaging.md"]),
    "pendulum": (
        [
            "--venv",
            IMITATION,
            "--arm",
            "ppo",
            "sac",
            "--seeds",
            "0",
            "--labels",
            "10",
            "--env-steps",
            "6000",
            "--sac-env-steps",
            "1400",
            "--iterations",
            "2",
            "--segment-length",
            "25",
            "--eval-episodes",
            "1",
            "--runs",
            "{tmp}/runs.jsonl",
            "--out",
            "{tmp}/pendulum.md",
        ],
        ["pendulum.md"],
    ),
    "crowd_study": (
        [
            "--env-id",
            "Pendulum-v1",
            "--quota",
            "6",
            "--total-steps",
            "1400",
            "--steps-per-round",
            "200",
            "--max-minutes",
            "3",
            "--eval-episodes",
            "1",
            "--practice",
            "1",
            "--away-s",
            "2",
            "--flag-by",
            "3",
            "--run-root",
            "{tmp}/runs",
            "--runs",
            "{tmp}/crowd_study_runs.jsonl",
            "--out",
            "{tmp}/crowd_study.md",
        ],
        ["crowd_study.md"],
    ),
    "studio_session": (
        [
            "--env-id",
            "Pendulum-v1",
            "--labels",
            "4",
            "--total-steps",
            "1400",
            "--steps-per-round",
            "200",
            "--steps-per-label",
            "200",
            "--max-minutes",
            "2",
            "--eval-episodes",
            "1",
            "--run-root",
            "{tmp}/runs",
            "--runs",
            "{tmp}/studio_session_runs.jsonl",
            "--out",
            "{tmp}/studio_session.md",
        ],
        ["studio_session.md"],
    ),
    "studio_media": (
        [
            "--segments",
            "3",
            "--length",
            "5",
            "--size",
            "64",
            "--warm-repeats",
            "1",
            "--workers",
            "1",
            "--capture-repeats",
            "1",
            "--out",
            "{tmp}/studio_media.md",
        ],
        ["studio_media.md"],
    ),
}

COVERED: dict[str, str] = {
    "llm_fig7": "tests/bench/test_llm_fig7_smoke.py::test_llm_fig7_bench_appends_runs_and_reports",
    "prefguide": (
        "tests/bench/test_prefguide_smoke.py::"
        "test_prefguide_bench_appends_runs_and_rebuilds_the_report"
    ),
    "studio_load": "tests/bench/test_studio_load.py::test_studio_load_smoke",
}
"""Benchmarks whose whole path a test of their own already runs at a tiny budget (with more
asserted than here): that test applies :func:`check_tables` and :func:`check_run_logs` to what it
wrote, and a second run of the bench here would add only its time."""

WARM = {"overhead"}
"""Benchmarks that run each measured run as ``python -m preflab.cli.main ...`` in a fresh process
(for its timing): here each such run is a process forked from the warm interpreter of
:mod:`tests.warm_python` (the same argv, exit status and output the bench reads), which spares
the ~7 s of CPU a fresh interpreter spends importing before the run's ~2 s."""

NEEDS_IMITATION = {"peer", "pendulum"}
"""Benchmarks that run imitation 1.0.1 in its own virtualenv (marker ``needs_imitation``)."""
SLOW = {
    "sweep_speed",
    "studio_session",
    "main_job",
    "packaging",
    "studio_groupwise",
    "routing",
    "crowd_study",
}
"""Smoke runs that take minutes even at their smallest (sweep_speed: 24 runs, with and without
Ray, and the ``sweep`` extra; studio_session: a trainer, a studio and a browser person for up to
two minutes, plus the oracle run; main_job: a git worktree of the baseline commit and two
training processes; packaging: a fresh virtualenv with every extra, then the main job;
studio_groupwise: a studio, Chromium and two scripted users, whose view and routes the default
tests/studio/test_e2e_groupwise.py drives already; routing: three walker runs, about a minute
on 2 cores, whose report tests/bench/test_routing.py checks by default; crowd_study: a trainer,
a studio, four Chromiums and eight API people for about two minutes, plus the oracle run, whose
parts tests/bench/test_crowd_study.py checks by default): they run with
``-m slow``."""


def _params() -> list[object]:
    out = []
    for name in available():
        if name in COVERED:
            continue
        marks = [pytest.mark.needs_imitation] if name in NEEDS_IMITATION else []
        marks += [pytest.mark.slow] if name in SLOW else []
        out.append(pytest.param(name, marks=marks, id=name))
    return out


def test_every_bench_has_a_smoke_spec() -> None:
    missing = sorted(set(available()) - set(SMOKE) - set(COVERED))
    assert not missing, (
        f"benchmarks without a smoke spec: {missing}; add tiny arguments (written under "
        "{tmp}) and the markdown files they write to SMOKE in tests/bench/test_smoke_all.py"
    )
    assert not set(SMOKE) & set(COVERED), "a bench is smoke-run here and covered elsewhere"


@pytest.mark.parametrize("name", sorted(COVERED))
def test_a_bench_covered_elsewhere_is_run_and_checked_there(name: str) -> None:
    path, test = COVERED[name].split("::")
    source = (REPO / path).read_text()
    body = source.split(f"def {test}(", 1)
    assert len(body) == 2, f"{COVERED[name]} does not exist: point COVERED[{name!r}] at the test"
    body = body[1].split("\ndef ", 1)[0]
    assert "main(" in body, f"{COVERED[name]} must run the bench's main(argv)"
    assert "check_tables(" in body, f"{COVERED[name]} must call check_tables(...) on its report"
    assert name in NO_RUN_LOG or "check_run_logs(" in body, (
        f"{COVERED[name]} must call check_run_logs(...) on the run log the bench wrote"
    )


def tables(text: str) -> list[list[list[str]]]:
    """The markdown tables in ``text``: lists of rows of cells (rule rows dropped)."""
    found: list[list[list[str]]] = []
    current: list[list[str]] = []
    for line in [*text.splitlines(), ""]:
        if line.startswith("|"):
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            if not all(re.fullmatch(r":?-{3,}:?", c) for c in cells):
                current.append(cells)
        elif current:
            found.append(current)
            current = []
    return found


def check_tables(path: Path) -> None:
    assert path.is_file(), f"the benchmark did not write {path.name}"
    text = path.read_text()
    assert text.startswith("#"), f"{path.name} has no title"
    found = tables(text)
    assert found, f"{path.name} has no markdown table"
    for t in found:
        assert len(t) >= 2, f"a table in {path.name} has a header but no rows: {t}"
        width = len(t[0])
        assert all(len(r) == width for r in t), f"ragged table in {path.name}: {t}"
        assert all(c for c in t[0]), f"empty header cell in {path.name}: {t[0]}"


@pytest.mark.parametrize("name", _params())
def test_bench_smoke(name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    if name not in SMOKE:
        pytest.fail(f"no smoke spec for {name}; see test_every_bench_has_a_smoke_spec")
    if name in NEEDS_IMITATION and not venv_python(DEFAULT_VENV).exists():
        pytest.skip(
            f"needs_imitation: {name} runs imitation 1.0.1 from {DEFAULT_VENV}, which is not "
            "built here (preflab_bench.peer.ensure_imitation_venv builds it)"
        )
    argv, files = SMOKE[name]
    argv = [a.replace("{tmp}", str(tmp_path)) for a in argv]
    module = importlib.import_module(f"preflab_bench.{name}")
    if name in WARM:
        monkeypatch.setattr(module, "subprocess", types.SimpleNamespace(run=warm_python.run))
    assert int(module.main(argv) or 0) == 0
    for f in files:
        check_tables(tmp_path / f)
    check_run_logs(tmp_path, name)


CURVES = ("_curves.jsonl", "_progress.jsonl")
"""Run logs that hold a run's curve (per round or checkpoint), not one row per run."""

NO_RUN_LOG = frozenset(
    {
        "atari_speed",
        "groupwise_speed",
        "llm_throughput",
        "main_job",
        "packaging",
        "peer",
        "restate",
        "store_throughput",
        "studio_groupwise",
        "studio_load",
        "studio_media",
        "sweep_speed",
    }
)
"""Benches without a run log: timings and tools whose one table (with its command) is the
result. Every other bench reproduces a result and logs each run with its command."""


def check_run_logs(folder: Path, name: str) -> None:
    """The bench wrote a run log (unless it is in NO_RUN_LOG), and every row of every run log it
    wrote names the command that made it."""
    logs = [log for log in folder.rglob("*.jsonl") if not log.name.endswith(CURVES)]
    assert logs or name in NO_RUN_LOG, (
        f"{name} wrote no run log (one row per run, with its command)"
    )
    for log in logs:
        rows = [json.loads(line) for line in log.read_text().splitlines() if line.strip()]
        missing = [r for r in rows if not str(r.get("command", "")).startswith("preflab ")]
        assert not missing, (
            f"{name}: {len(missing)} of {len(rows)} rows of {log.name} lack a command"
        )
