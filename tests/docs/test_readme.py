"""Every ``preflab ...`` command in README.md's bash blocks runs as written (parsed from the README,
so a command added later is tested automatically), and the Python snippet runs as written.

Long commands get tiny-budget flags appended (:data:`SHRINK`, keyed by the command's start:
argparse and tyro let a later flag win); commands that serve (the studio, the stand-in judge)
run until they print what the README promises, then are stopped. A README command the table
does not know fails the test, saying so. Set-up lines (``bash scripts/...``) are skipped.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests import warm_python

README = Path(__file__).resolve().parents[2] / "README.md"

TINY = (
    "--total-steps 400 --total-labels 4 --initial-steps 200 --steps-per-round 200 "
    "--segment-length 20 --eval-episodes 1 --pool-size 20"
)
"""Budgets that make any training command a few seconds' work."""
TINY_MUJOCO = (
    TINY.replace("--total-steps 400", "--total-steps 800").replace(
        "--initial-steps 200", "--initial-steps 400"
    )
    + " --n-envs 2"
)


@dataclass(frozen=True)
class Plan:
    """How the test runs one README command."""

    extra: str = ""
    """Flags appended to the command as written ({port}, {judge} are filled in)."""
    kind: str = "run"
    """'run' (must exit 0), 'serve' (must print ``ready``, then is stopped)."""
    ready: str = ""
    """For 'serve': the text that must appear."""
    slow: bool = False
    """Marked slow (run with -m slow)."""


SHRINK: dict[str, Plan] = {
    "preflab train --help": Plan(),
    "preflab train --total-labels 50 --seed 1 --print-config": Plan(),
    "preflab train --config my_run.toml": Plan(TINY),
    "preflab eval": Plan(),
    "preflab record": Plan(),
    "preflab crowd aggregate labels/": Plan(),
    "preflab sweep --preset smoke --axis seed=0,1,2": Plan(
        "--sequential --set total_steps=400 --set eval_episodes=1"
    ),
    "preflab train --env-id Hopper-v5 --algo ppo --studio": Plan(
        TINY_MUJOCO + " --studio-port {port}", "serve", "#token=", slow=True
    ),
    "preflab train --env-id Hopper-v5": Plan(TINY_MUJOCO, slow=True),
    "preflab train --env-id PrefLab/NoLock-v0 --algo ppo --source llm": Plan(
        TINY + " --llm.base-url {judge}"
    ),
    "preflab train --source store": Plan(TINY + " --max-minutes 0.05"),
    "preflab train --env-id dm_control/walker-walk-v0": Plan(TINY),
    "preflab train --preset bpref/walker_walk-pebble": Plan(
        TINY
        + " --net-arch 32 32 --agent-kwargs '{{\"batch_size\": 64}}' --reward.hidden 16 --unsup-steps 100",
        slow=True,  # the preset's path runs in the bpref bench smoke and tests/cli/test_presets.py
    ),
    "preflab train --store-url": Plan(TINY, slow=True),
    # JAX's start-up and compiles take ~30 s; the backend is tested in tests/policy and
    # tests/runstate/test_resume_sbx.py
    "preflab train --backend sbx": Plan(TINY, slow=True),
    "preflab train": Plan(TINY),
    "preflab llm serve-fake": Plan("--port {port}", "serve", "stop with Ctrl-C"),
    "preflab llm serve-local": Plan("--port {port}", "serve", "stop with Ctrl-C"),
    "preflab export --check": Plan(),
    "preflab export": Plan(),
    "preflab crowd aggregate": Plan(),
    "preflab bench": Plan(),
    "preflab studio add-annotator": Plan(),
    "preflab studio": Plan("--port {port}", "serve", "#token=", slow=True),
    "preflab label": Plan(),
    "preflab fit": Plan(),
    "preflab sweep benchmarks/sweeps/pendulum_labels.toml": Plan(
        "--sequential --axis total_labels=4 --axis seed=0 "
        + " ".join(
            f"--set {f.removeprefix('--').replace('-', '_')}={v}"
            for f, v in zip(TINY.split()[::2], TINY.split()[1::2], strict=True)
        ),
        slow=True,
    ),
    "preflab sweep --preset smoke": Plan("--sequential", slow=True),
}
"""Keyed by the command's start (the longest matching key wins)."""

SKIPPED = ("bash scripts/", "PREFLAB_SCREENSHOTS=1 python -m pytest", "cd studio/web")
"""README lines that are not PrefLab commands: set-up, the test script, development tools."""

PLACEHOLDERS = {"runs/<dir>": "runs/tiny", "postgresql+psycopg://user@host/db": "$STORE"}
"""README placeholders and what the test puts there."""


@dataclass(frozen=True)
class Command:
    text: str
    """The command as written (continuation lines joined, comment dropped)."""
    env: tuple[tuple[str, str], ...]
    """``export NAME=VALUE`` lines before it in the same block."""


def readme_commands() -> list[Command]:
    """The commands of README.md's bash blocks; unknown non-PrefLab lines fail."""
    out: list[Command] = []
    for block in re.findall(r"```bash\n(.*?)```", README.read_text(), flags=re.S):
        env: list[tuple[str, str]] = []
        for line in block.replace("\\\n", " ").splitlines():
            words = shlex.split(line, comments=True)
            if not words:
                continue
            for part in " ".join(shlex.quote(w) for w in words).split(" '&&' "):
                text = part.strip()
                if text.startswith("export "):
                    name, _, value = shlex.split(text)[1].partition("=")
                    env.append((name, value))
                elif text.startswith(SKIPPED):
                    continue
                elif re.match(r"^(\S*/)?preflab ", text):
                    text = re.sub(r"^\S*/preflab ", "preflab ", text)
                    out.append(Command(text, tuple(env)))
                else:
                    raise AssertionError(
                        f"README bash line {line!r} is neither a preflab command nor known "
                        "set-up; add it to SKIPPED in tests/docs/test_readme.py"
                    )
    return out


def plan_for(text: str) -> Plan:
    keys = [k for k in SHRINK if text == k or text.startswith(k + " ")]
    if not keys:
        raise AssertionError(
            f"README command {text!r} has no entry in SHRINK (tests/docs/test_readme.py): add "
            "how to run it at a tiny budget"
        )
    return SHRINK[max(keys, key=len)]


COMMANDS = readme_commands()


def _params() -> list[object]:
    out: list[object] = []
    for i, c in enumerate(COMMANDS):
        try:
            slow = plan_for(c.text).slow or "STORE" in c.text or "postgresql" in c.text
        except AssertionError:
            slow = False
        marks = [pytest.mark.slow] if slow else []
        out.append(pytest.param(c, id=f"{i:02d}-{c.text[:60]}", marks=marks))
    return out


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _cli(*words: str) -> list[str]:
    return [sys.executable, "-m", "preflab.cli.main", *words]


def _env() -> dict[str, str]:
    env = os.environ.copy()
    src = str(Path(__file__).resolve().parents[2] / "src")
    env["PYTHONPATH"] = src + os.pathsep + env.get("PYTHONPATH", "")
    return env


@pytest.fixture(scope="module")
def workspace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The directory README commands run in, with a tiny finished run at runs/tiny and a
    crowd judgements.csv (the inputs the README's examples name)."""
    ws = tmp_path_factory.mktemp("readme")
    shutil.copytree(README.parent / "benchmarks" / "sweeps", ws / "benchmarks" / "sweeps")
    rows = ["query,annotator,answer"]
    rows += [f"q{q},u{u},{1 if (q + u) % 4 else -1}" for q in range(8) for u in range(4)]
    (ws / "judgements.csv").write_text("\n".join(rows) + "\n")
    return ws


LABELLING = "runs/labelled"
"""The README's labelling run (``preflab label``, then ``studio`` and ``fit`` on it)."""


def _ensure_export(ws: Path, rel: str, env: dict[str, str]) -> None:
    """An export at ``rel`` (the README's tour made one from runs/tiny)."""
    if not (ws / rel).exists():
        _ensure_run(ws, "runs/tiny")
        r = warm_python.run(_cli("export", "runs/tiny", "--out", rel), cwd=ws, env=env)
        assert r.returncode == 0


def _ensure_labelling(ws: Path, env: dict[str, str], *, answered: bool) -> None:
    """The README's labelling run; ``answered``: every pair answered, as a person would, by the
    segments' true returns (``preflab fit`` needs answers)."""
    from preflab.records import Annotator, Judgement
    from preflab.store import FeedbackStore

    run = ws / LABELLING
    if not (run / "labelling.json").exists():
        _ensure_export(ws, "labels/", env)
        cmd = _cli(
            "label", "labels/", "--run-dir", LABELLING, "--pairs", "20", "--segment-length", "10"
        )
        assert warm_python.run(cmd, cwd=ws, env=env).returncode == 0
    if not answered:
        return
    store = FeedbackStore(run / "feedback.db", array_dir=run / "segments")
    try:
        if store.answers.judgements():
            return
        store.annotators.add(Annotator(id="h-readme", source="human", name="readme"))
        qs = store.queries.all()
        segs = {sg.id: sg for sg in store.segments.get([x for q in qs for x in (*q.a, *q.b)])}
        store.answers.add(
            Judgement(
                id=f"j-readme-{k}",
                query_id=q.id,
                annotator_id="h-readme",
                source="human",
                p=float(segs[q.a[0]].true_return > segs[q.b[0]].true_return),
            )
            for k, q in enumerate(qs)
        )
    finally:
        store.close()


def _ensure_run(ws: Path, rel: str) -> None:
    if (ws / rel / "config.json").exists():  # made by an earlier README command
        return
    cmd = _cli("train", "--algo", "ppo", *TINY.split(), "--run-dir", rel)
    r = warm_python.run(cmd, cwd=ws, env=_env(), capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-2000:]


@pytest.fixture(scope="module")
def judge(workspace: Path) -> Iterator[str]:
    """A stand-in judge (preflab llm serve-fake) on a free port."""
    port = _free_port()
    proc = warm_python.popen(
        _cli("llm", "serve-fake", "--port", str(port)),
        env=_env(),
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        _wait_for(proc, "stop with Ctrl-C", 120)
        yield f"http://127.0.0.1:{port}/v1"
    finally:
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=30)


def _wait_for(proc: Any, text: str, timeout_s: float) -> str:
    stream = proc.stderr if proc.stdout is None else proc.stdout
    assert stream is not None
    seen: list[str] = []
    found = threading.Event()

    def read() -> None:
        for line in stream:
            seen.append(line)
            if text in line:
                found.set()

    threading.Thread(target=read, daemon=True).start()
    end = time.monotonic() + timeout_s
    while time.monotonic() < end and not found.is_set() and proc.poll() is None:
        time.sleep(0.2)
    found.wait(1.0)
    assert found.is_set(), f"{text!r} never printed; output:\n{''.join(seen)[-3000:]}"
    return "".join(seen)


@pytest.mark.parametrize("command", _params())
def test_readme_command_runs_as_written(
    command: Command, workspace: Path, request: pytest.FixtureRequest
) -> None:
    plan = plan_for(command.text)
    text = command.text
    for placeholder, value in PLACEHOLDERS.items():
        text = text.replace(placeholder, value)
    env = _env() | dict(command.env)
    if "$STORE" in text:
        env["STORE"] = request.getfixturevalue("postgres_url")
        env.pop("PGPASSWORD", None)
    fill = {"port": str(_free_port())}
    if "{judge}" in plan.extra:
        fill["judge"] = request.getfixturevalue("judge")
    words = [re.sub(r"\$(\w+)", lambda m: env[m.group(1)], w) for w in shlex.split(text)]
    words += shlex.split(plan.extra.format(**fill))
    ws = workspace
    if words[1] == "label":  # it makes the labelling run afresh
        shutil.rmtree(ws / LABELLING, ignore_errors=True)
        _ensure_export(ws, words[2], env)
    elif LABELLING in words:
        _ensure_labelling(ws, env, answered=words[1] == "fit")
    for w in words[2:]:  # runs the command reads must exist: a tiny one stands in
        if w.startswith("runs/") and words[1] not in ("train", "label") and w != LABELLING:
            _ensure_run(ws, w.rstrip("/"))
    reads_export = words[:3] in (
        ["preflab", "export", "--check"],
        ["preflab", "crowd", "aggregate"],
    )
    if reads_export and words[3].endswith("/") and not (ws / words[3]).exists():
        _ensure_run(ws, "runs/tiny")  # an export the README made earlier in the tour
        r = warm_python.run(_cli("export", "runs/tiny", "--out", words[3]), cwd=ws, env=env)
        assert r.returncode == 0
    cmd = _cli(*words[1:])
    if plan.kind == "serve":
        proc = warm_python.popen(
            cmd, cwd=ws, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
        )
        try:
            _wait_for(proc, plan.ready, 300)
        finally:
            proc.send_signal(signal.SIGINT)
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        return
    r = warm_python.run(cmd, cwd=ws, env=env, capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, f"{' '.join(words)}\n{r.stdout[-1500:]}\n{r.stderr[-3000:]}"


def test_every_readme_command_has_a_plan() -> None:
    assert COMMANDS, "no preflab commands found in README.md"
    for c in COMMANDS:
        plan_for(c.text)


def test_readme_python_snippet_runs_as_written(tmp_path: Path) -> None:
    """The README's Python blocks, in order in one process, with the label and step budgets
    made tiny (the first trains runs/demo; the later ones use it)."""
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.S)
    assert blocks, "README has no python block"
    code = (
        "\n".join(blocks)
        .replace("SAC", "PPO")
        .replace(
            'TrainConfig(env_id="Pendulum-v1", total_labels=100)',
            'TrainConfig(env_id="Pendulum-v1", algo="ppo", total_labels=4, total_steps=400, '
            "initial_steps=200, steps_per_round=200, segment_length=20, eval_episodes=1, "
            "pool_size=20)",
        )
        .replace(  # the callback's example
            'TrainConfig(env_id="Pendulum-v1", algo="sac", total_steps=20_000, total_labels=200)',
            'TrainConfig(env_id="Pendulum-v1", algo="ppo", total_labels=4, total_steps=400, '
            "initial_steps=200, steps_per_round=200, segment_length=20, eval_episodes=1, "
            "pool_size=20)",
        )
        .replace(
            'PPO("MlpPolicy", "Pendulum-v1", seed=0)',
            'PPO("MlpPolicy", "Pendulum-v1", seed=0, n_steps=100, batch_size=50)',
        )
    )
    assert code != "\n".join(blocks), "the README snippet's TrainConfig changed: update this test"
    r = warm_python.run(
        [sys.executable, "-c", code],
        cwd=tmp_path,
        env=_env(),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert r.returncode == 0, r.stderr[-3000:]
