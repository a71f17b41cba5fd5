"""Running the documentation's commands and code as written: the ``preflab ...`` commands of a
Markdown page's ``bash`` blocks (parsed from the page, so a command added later is tested
automatically), its ``python`` blocks, and files it shows with a title (```` ```python
title="prefs.py" ````), which are written into the directory the commands run in.

Long commands get tiny-budget flags appended (:data:`SHRINK`, keyed by the command's start:
argparse and tyro let a later flag win); commands that serve (the studio, the stand-in judges)
run until they print what the page promises, then are stopped. A command the table does not
know fails its test, saying so. Set-up lines (``bash scripts/...``) are skipped. Python blocks
run in order in one process, with every ``TrainConfig(...)`` given the tiny budgets
(:data:`TINY_KW`) and SAC swapped for PPO (a few hundred steps of SAC's updates take longer).
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

ROOT = Path(__file__).resolve().parents[2]

TINY = (
    "--total-steps 400 --total-labels 4 --initial-steps 300 --steps-per-round 100 "
    "--segment-length 20 --eval-episodes 1 --pool-size 20"
)
"""Budgets that make any training command a few seconds' work: two rounds (round 0 after 300
steps, round 1 after 400) of 20-step segments. A SAC run (the default algorithm) takes its
gradient steps after the first 300 steps: 100 of them (with the earlier 200 + 200 steps, 200 for
the same two rounds: 0.6 s of CPU more per command; docs/guide/test-time.md)."""
TINY_MUJOCO = (
    TINY.replace("--total-steps 400", "--total-steps 800")
    .replace("--initial-steps 300", "--initial-steps 400")
    .replace("--steps-per-round 100", "--steps-per-round 200")
    + " --n-envs 2"
)
TINY_KW = {
    "algo": "ppo",
    "total_labels": 4,
    "total_steps": 400,
    "initial_steps": 300,
    "steps_per_round": 100,
    "segment_length": 20,
    "eval_episodes": 1,
    "pool_size": 20,
}
"""The same budgets for ``TrainConfig(...)`` in Python blocks."""


@dataclass(frozen=True)
class Plan:
    """How the test runs one documented command."""

    extra: str = ""
    """Flags appended to the command as written ({port}, {judge}, {vlm} are filled in)."""
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
    "preflab train --env-id HalfCheetah-v5": Plan(TINY_MUJOCO),
    "preflab train --env-id PrefLab/NoLock-v0 --algo ppo --source llm": Plan(
        TINY + " --llm.base-url {judge}"
    ),
    "preflab train --env-id Pendulum-v1 --source vlm": Plan(
        TINY.replace("--total-labels 4", "--total-labels 2") + " --vlm.base-url {vlm}"
    ),
    "preflab train --source store": Plan(TINY + " --max-minutes 0.05"),
    "preflab train --env-id dm_control/walker-walk-v0": Plan(TINY),
    "preflab train --preset bpref/walker_walk-pebble": Plan(
        TINY
        + " --net-arch 32 32 --agent-kwargs '{{\"batch_size\": 64}}' --reward.hidden 16 --unsup-steps 100"
        + " --initial-steps 200 --steps-per-round 200",  # room for the 100 unsupervised steps
        slow=True,  # the preset's path runs in the bpref bench smoke and tests/cli/test_presets.py
    ),
    "preflab train --store-url": Plan(TINY, slow=True),
    # JAX's start-up and compiles take ~30 s; the backend is tested in tests/policy and
    # tests/runstate/test_resume_sbx.py
    "preflab train --backend sbx": Plan(TINY, slow=True),
    "preflab train": Plan(TINY),
    "preflab llm serve-fake": Plan("--port {port}", "serve", "stop with Ctrl-C"),
    "preflab llm serve-local": Plan("--port {port}", "serve", "stop with Ctrl-C"),
    "python -m preflab.testing.vlmserver": Plan("--port {port}", "serve", "stand-in VLM server"),
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
        )
        # the spec's PPO batch of 64 on 8 envs needs rollouts of a multiple of 64 steps
        + " --set steps_per_round=512 --set initial_steps=512 --set total_steps=1024",
        slow=True,
    ),
    "preflab sweep --preset smoke": Plan("--sequential", slow=True),
}
"""Keyed by the command's start (the longest matching key wins)."""

SKIPPED = ("bash scripts/", "PREFLAB_SCREENSHOTS=1 python -m pytest", "cd studio/web")
"""Documented lines that are not PrefLab commands: set-up, the test script, development tools."""

PLACEHOLDERS = {"runs/<dir>": "runs/tiny", "postgresql+psycopg://user@host/db": "$STORE"}
"""Placeholders and what the test puts there."""


@dataclass(frozen=True)
class Command:
    text: str
    """The command as written (continuation lines joined, comment dropped)."""
    env: tuple[tuple[str, str], ...]
    """``export NAME=VALUE`` lines before it in the same block."""
    page: str = ""
    """Where it is written (relative to the repository)."""


def _fences(text: str, lang: str) -> list[tuple[str, str]]:
    """(info after the language, body) of every ``lang`` block, indented ones included."""
    out = []
    pattern = r"^( *)```" + lang + r"([^\n]*)\n(.*?)^\1```"
    for m in re.finditer(pattern, text, flags=re.S | re.M):
        indent = len(m.group(1))
        body = "\n".join(line[indent:] for line in m.group(3).splitlines())
        out.append((m.group(2).strip(), body + "\n"))
    return out


def commands_of(path: Path) -> list[Command]:
    """The commands of a page's bash blocks; unknown non-PrefLab lines fail."""
    out: list[Command] = []
    page = path.relative_to(ROOT).as_posix()
    for _info, block in _fences(path.read_text(encoding="utf-8"), "bash"):
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
                elif re.match(r"^(\S*/)?preflab ", text) or text.startswith("python -m preflab."):
                    text = re.sub(r"^\S*/preflab ", "preflab ", text)
                    out.append(Command(text, tuple(env), page))
                else:
                    raise AssertionError(
                        f"{page}: bash line {line!r} is neither a preflab command nor known "
                        "set-up; add it to SKIPPED in tests/docs/commands.py"
                    )
    return out


def files_of(path: Path) -> dict[str, str]:
    """The files a page shows with a title: name → text."""
    out = {}
    for info, body in _fences(path.read_text(encoding="utf-8"), "python"):
        m = re.search(r'title="([^"]+)"', info)
        if m:
            out[m.group(1)] = body
    return out


def python_code(path: Path) -> tuple[str, str]:
    """(as written, as the test runs it) of a page's untitled python blocks, in order."""
    blocks = [b for info, b in _fences(path.read_text(encoding="utf-8"), "python") if not info]
    code = "\n".join(blocks)
    run = re.sub(r"\bSAC\b", "PPO", code).replace("TrainConfig(", "_docs_config(")
    run = run.replace(
        'PPO("MlpPolicy", "Pendulum-v1", seed=0)',
        'PPO("MlpPolicy", "Pendulum-v1", seed=0, n_steps=100, batch_size=50)',
    )
    prelude = (
        "def _docs_config(**kw):\n"
        "    from preflab.config import TrainConfig as _TrainConfig\n"
        f"    return _TrainConfig(**(kw | {TINY_KW!r}))\n\n"
    )
    return code, prelude + run


def plan_for(text: str) -> Plan:
    keys = [k for k in SHRINK if text == k or text.startswith(k + " ")]
    if not keys:
        raise AssertionError(
            f"documented command {text!r} has no entry in SHRINK (tests/docs/commands.py): add "
            "how to run it at a tiny budget"
        )
    return SHRINK[max(keys, key=len)]


def params(commands: list[Command]) -> list[object]:
    out: list[object] = []
    for i, c in enumerate(commands):
        try:
            slow = plan_for(c.text).slow or "STORE" in c.text or "postgresql" in c.text
        except AssertionError:
            slow = False
        marks = [pytest.mark.slow] if slow else []
        name = Path(c.page).stem
        out.append(pytest.param(c, id=f"{i:02d}-{name}-{c.text[:50]}", marks=marks))
    return out


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def cli(*words: str) -> list[str]:
    return [sys.executable, "-m", "preflab.cli.main", *words]


def env() -> dict[str, str]:
    out = os.environ.copy()
    src = str(ROOT / "src")
    out["PYTHONPATH"] = src + os.pathsep + out.get("PYTHONPATH", "")
    return out


def make_workspace(ws: Path, pages: list[Path]) -> Path:
    """The directory documented commands run in: the sweeps folder, a crowd judgements.csv
    and the files the pages show (the inputs their examples name)."""
    shutil.copytree(ROOT / "benchmarks" / "sweeps", ws / "benchmarks" / "sweeps")
    rows = ["query,annotator,answer"]
    rows += [f"q{q},u{u},{1 if (q + u) % 4 else -1}" for q in range(8) for u in range(4)]
    (ws / "judgements.csv").write_text("\n".join(rows) + "\n")
    for page in pages:
        for name, text in files_of(page).items():
            (ws / name).write_text(text)
    return ws


LABELLING = "runs/labelled"
"""The labelling run of the docs (``preflab label``, then ``studio`` and ``fit`` on it)."""


def _ensure_export(ws: Path, rel: str, environ: dict[str, str]) -> None:
    """An export at ``rel`` (the tour made one from runs/tiny)."""
    if not (ws / rel).exists():
        _ensure_run(ws, "runs/tiny")
        r = warm_python.run(cli("export", "runs/tiny", "--out", rel), cwd=ws, env=environ)
        assert r.returncode == 0


def _ensure_labelling(ws: Path, environ: dict[str, str], *, answered: bool) -> None:
    """The labelling run; ``answered``: every pair answered, as a person would, by the
    segments' true returns (``preflab fit`` needs answers)."""
    from preflab.records import Annotator, Judgement
    from preflab.store import FeedbackStore

    run = ws / LABELLING
    if not (run / "labelling.json").exists():
        _ensure_export(ws, "labels/", environ)
        cmd = cli(
            "label", "labels/", "--run-dir", LABELLING, "--pairs", "20", "--segment-length", "10"
        )
        assert warm_python.run(cmd, cwd=ws, env=environ).returncode == 0
    if not answered:
        return
    store = FeedbackStore(run / "feedback.db", array_dir=run / "segments")
    try:
        if store.answers.judgements():
            return
        store.annotators.add(Annotator(id="h-docs", source="human", name="docs"))
        qs = store.queries.all()
        segs = {sg.id: sg for sg in store.segments.get([x for q in qs for x in (*q.a, *q.b)])}
        store.answers.add(
            Judgement(
                id=f"j-docs-{k}",
                query_id=q.id,
                annotator_id="h-docs",
                source="human",
                p=float(segs[q.a[0]].true_return > segs[q.b[0]].true_return),
            )
            for k, q in enumerate(qs)
        )
    finally:
        store.close()


def _ensure_run(ws: Path, rel: str) -> None:
    if (ws / rel / "config.json").exists():  # made by an earlier command
        return
    cmd = cli("train", "--algo", "ppo", *TINY.split(), "--run-dir", rel)
    r = warm_python.run(cmd, cwd=ws, env=env(), capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-2000:]


def serve(cmd: list[str], ready: str, **kw: Any) -> Iterator[Any]:
    """A serving process, yielded once it printed ``ready``; stopped with SIGINT after."""
    proc = warm_python.popen(cmd, env=env(), stderr=subprocess.PIPE, text=True, **kw)
    try:
        wait_for(proc, ready, 120)
        yield proc
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def wait_for(proc: Any, text: str, timeout_s: float) -> str:
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


def run_command(command: Command, ws: Path, request: pytest.FixtureRequest) -> None:
    """Run one documented command in ``ws`` as its plan says, asserting it works."""
    plan = plan_for(command.text)
    text = command.text
    for placeholder, value in PLACEHOLDERS.items():
        text = text.replace(placeholder, value)
    environ = env() | dict(command.env)
    if "$STORE" in text:
        environ["STORE"] = request.getfixturevalue("postgres_url")
        environ.pop("PGPASSWORD", None)
    fill = {"port": str(free_port())}
    for name in ("judge", "vlm"):
        if "{" + name + "}" in plan.extra:
            fill[name] = request.getfixturevalue(name)
    words = [re.sub(r"\$(\w+)", lambda m: environ[m.group(1)], w) for w in shlex.split(text)]
    words += shlex.split(plan.extra.format(**fill))
    if words[0] == "python":
        cmd = [sys.executable, *words[1:]]
    else:
        if words[1] == "label":  # it makes the labelling run afresh
            shutil.rmtree(ws / LABELLING, ignore_errors=True)
            _ensure_export(ws, words[2], environ)
        elif LABELLING in words:
            _ensure_labelling(ws, environ, answered=words[1] == "fit")
        for w in words[2:]:  # runs the command reads must exist: a tiny one stands in
            if w.startswith("runs/") and words[1] not in ("train", "label") and w != LABELLING:
                _ensure_run(ws, w.rstrip("/"))
        reads_export = words[:3] in (
            ["preflab", "export", "--check"],
            ["preflab", "crowd", "aggregate"],
        )
        if reads_export and words[3].endswith("/") and not (ws / words[3]).exists():
            _ensure_run(ws, "runs/tiny")  # an export made earlier in the tour
            r = warm_python.run(cli("export", "runs/tiny", "--out", words[3]), cwd=ws, env=environ)
            assert r.returncode == 0
        cmd = cli(*words[1:])
    if plan.kind == "serve":
        proc = warm_python.popen(
            cmd, cwd=ws, env=environ, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
        )
        try:
            wait_for(proc, plan.ready, 300)
        finally:
            proc.send_signal(signal.SIGINT)
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        return
    r = warm_python.run(cmd, cwd=ws, env=environ, capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, f"{' '.join(words)}\n{r.stdout[-1500:]}\n{r.stderr[-3000:]}"


def run_python(path: Path, cwd: Path) -> None:
    """A page's python blocks, in order in one process, at the tiny budgets."""
    code, run = python_code(path)
    if "TrainConfig(" in code:
        assert "_docs_config(" in run, f"{path.name}: its TrainConfig calls were not shrunk"
    r = warm_python.run(
        [sys.executable, "-c", run], cwd=cwd, env=env(), capture_output=True, text=True, timeout=600
    )
    assert r.returncode == 0, f"{path.name}\n{r.stderr[-3000:]}"
