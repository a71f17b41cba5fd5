"""Run the queue of pre-registered benchmark runs (benchmarks/queue.toml) across sessions.

Each job of the queue is one plan entry: its commands, the run log its bench appends to, and the
frozen commit its runs use. A command whose row is already in the run log is done. Every other
command runs, from the checkout's top (so rows go to the checkout's run logs and the plan is the
checkout's ``benchmarks/plan.toml``), with the frozen commit's ``src`` first on ``PYTHONPATH``
(exported once with ``git archive`` into ``--code-dir``), in invocations of at most
``--minutes``: a bench stopped by that limit continues from its last checkpoint when the same
command runs again, so a run of more than an hour, or one cut by the end of a session, goes on
where it stopped. It goes on only if its invocations reach a checkpoint: each starts again from
the last one, so a run whose stretch between two checkpoints takes longer than ``--minutes`` on
the machine as loaded never ends. Round 0 of a run with PEBBLE's pre-training and RIME's warm
start is such a stretch in code before 6368120, which checkpoints after the pre-training (the
frontier entries' frozen code, c3955e4, is older): on 2026-12-07 one took over an hour at
nice 19 beside tests, and ended only in an invocation of 120 minutes with its process at nice 0.

Usage (from the checkout's top, with PrefLab's virtualenv)::

    .venv/bin/python benchmarks/run_queue.py list           # what is done, what is left
    .venv/bin/python benchmarks/run_queue.py forecast       # run-hours left, from the done runs
    .venv/bin/python benchmarks/run_queue.py run            # two runs side by side until done
    .venv/bin/python benchmarks/run_queue.py run --until 04:10   # only runs that end by then
    .venv/bin/python benchmarks/run_queue.py pause          # SIGSTOP every running invocation
    .venv/bin/python benchmarks/run_queue.py resume         # SIGCONT them
    .venv/bin/python benchmarks/run_queue.py drain          # start no further run
    .venv/bin/python benchmarks/run_queue.py transcribe     # start records from the queue's log

Before a command's first invocation the queue appends its start record to
``benchmarks/results/queue_starts.jsonl`` (``--starts``), so the record shows that each run
began after its plan entry (``preflab_bench._registration``; a row's end less its wall time
does not bound that: a resumed run began earlier). ``transcribe`` adds the records a queue that
wrote none left only in its log (``--state-dir``/``log``), each naming that log.

``run --engine ray`` submits each invocation as a Ray task that declares ``--cpus-per-run`` CPUs
and ``--gpus-per-run`` GPUs (a fraction shares one GPU), on a local Ray instance or on the cluster
at ``--address HOST:PORT``; Ray places the invocations, ``--workers`` of them at a time, and the
frozen code, the run logs and the done rule stay as they are. On a cluster the checkout,
``--state-dir`` and ``--code-dir`` must be on a folder every node mounts at the same path
(docs/guide/ray.md); an invocation's process group is then recorded under
``--state-dir``/``ray-<host>``, so ``pause``/``resume`` with that state folder act on one node.

``pause`` is for a quiet machine meanwhile (a test run, a timing); the invocation limit keeps
counting wall time while paused. ``drain`` lets the running invocations finish and starts no
further run, nor a further invocation of a run that its limit stopped (it stays at its
checkpoint): before a session ends, where a run cut short would lose its last round, or to free
the machine at the end of a run; the next ``run`` clears it. ``--until`` cuts every invocation
at that time and starts none after it. Each invocation runs in a process group of its own, recorded in
``--state-dir``; its output goes to ``--state-dir``/``<plan>-w<worker>.out``, and one line per start
and end to ``--state-dir``/``log``.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import io
import itertools
import json
import os
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tarfile
import tempfile
import threading
import tomllib
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from preflab_bench._registration import STARTS, load_starts

ROOT = Path(__file__).resolve().parents[1]
QUEUE = ROOT / "benchmarks" / "queue.toml"
STATE = Path(tempfile.gettempdir()) / "preflab-queue"
DRAIN = "drain"  # a file in the state folder: while it exists no run starts


@dataclass(frozen=True, kw_only=True)
class Run:
    """One command of the queue."""

    plan: str
    """The plan entry it belongs to."""
    code: str
    """The frozen commit whose ``src`` it runs."""
    log: Path
    """The run log (JSON lines) where its row appears once it is done."""
    command: str
    """The command, as the entry's note spells it and as its row will record it."""
    like: tuple[tuple[str, str], ...] = ()
    """Its grid values other than the seed: the runs of one entry that share them (one arm, one
    env) take about as long as each other (:func:`expected_hours`)."""


def load_queue(path: Path = QUEUE) -> list[Run]:
    """Every command of the queue, in order: job by job, each job's grid with the last key
    varying fastest."""
    runs: list[Run] = []
    for n, job in enumerate(tomllib.loads(path.read_text())["job"]):
        for key in ("plan", "code", "log", "command"):
            if not isinstance(job.get(key), str):
                raise SystemExit(f"{path}: job {n + 1} needs a string '{key}'")
        grid: dict[str, list[object]] = job.get("grid", {})
        for values in itertools.product(*grid.values()):
            try:
                command = job["command"].format(**dict(zip(grid, values, strict=True)))
            except KeyError as exc:
                raise SystemExit(
                    f"{path}: job {n + 1}'s command names {{{exc.args[0]}}}; add it to its grid"
                ) from None
            like = tuple((k, str(v)) for k, v in zip(grid, values, strict=True) if k != "seed")
            runs.append(
                Run(
                    plan=job["plan"],
                    code=job["code"],
                    log=ROOT / job["log"],
                    command=command,
                    like=like,
                )
            )
    return runs


def _log_rows(log: Path) -> list[dict[str, Any]]:
    """The rows of a run log (none when it does not exist yet); a line that is not JSON stops
    with its place named."""
    if not log.exists():
        return []
    rows: list[dict[str, Any]] = []
    for n, line in enumerate(log.read_text().splitlines(), start=1):
        if not line.strip():
            continue
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError as exc:
            raise SystemExit(
                f"{log}, line {n}: not a JSON row ({exc.msg}); mend or remove that line "
                "(the benches' reports read the same file)"
            ) from None
    return rows


def done(run: Run) -> bool:
    """Whether the run log holds a row with exactly this command."""
    return any(row.get("command") == run.command for row in _log_rows(run.log))


def _wall_hours(run: Run, rows: list[dict[str, Any]]) -> float | None:
    """The run's wall time in hours: the sum of ``wall_s`` over its command's rows (a bench
    may log a row per part of its run); None when it has no timed row."""
    own = [row for row in rows if row.get("command") == run.command]
    timed = [float(row["wall_s"]) for row in own if row.get("wall_s") is not None]
    return sum(timed) / 3600 if timed else None


def expected_hours(run: Run, runs: list[Run]) -> float | None:
    """About how long ``run`` takes: the mean wall time of the done runs of ``runs`` in its
    plan entry with its grid values but the seed (:attr:`Run.like`: same arm, same env), else
    of all its entry's done runs; for an entry with none, of the done runs of other entries in
    its run log with its grid values (one bench, one arm: frontier-attribution-walker's pretrain
    from frontier-tuning-walker's); None when none of them is timed. ``wall_s`` leaves out the
    set-up and the final evaluation; :data:`UNTIL_MARGIN` allows for them."""
    rows_of: dict[Path, list[dict[str, Any]]] = {}

    def mean(group: list[Run]) -> float | None:
        walls = [
            w
            for r in group
            if (w := _wall_hours(r, rows_of.setdefault(r.log, _log_rows(r.log)))) is not None
        ]
        return sum(walls) / len(walls) if walls else None

    others = [r for r in runs if r.command != run.command]
    entry = [r for r in others if r.plan == run.plan]
    for group in (
        [r for r in entry if r.like == run.like],
        entry,
        [r for r in others if r.log == run.log and r.like == run.like and r.like],
    ):
        if (hours := mean(group)) is not None:
            return hours
    return None


UNTIL_MARGIN = 1.25
"""``--until`` starts a run only when its expected wall time times this fits before the
deadline: the set-up and the final evaluation ``wall_s`` leaves out, and a machine shared with
other work."""


def parse_until(text: str, now: datetime) -> datetime:
    """``--until``: ``YYYY-MM-DDTHH:MM`` or ``HH:MM`` (UTC; the next such time after ``now``)."""
    for fmt in ("%Y-%m-%dT%H:%M", "%H:%M"):
        try:
            t = datetime.strptime(text, fmt).replace(tzinfo=UTC)
        except ValueError:
            continue
        if fmt == "%H:%M":
            t = now.replace(hour=t.hour, minute=t.minute, second=0, microsecond=0)
            if t <= now:
                t += timedelta(days=1)
        return t
    raise SystemExit(
        f"--until {text!r}: expected the UTC time the machine goes away, as HH:MM (e.g. 04:10) "
        "or YYYY-MM-DDTHH:MM (e.g. 2026-12-07T04:10)"
    )


def forecast(runs: list[Run], workers: int) -> str:
    """One line per plan entry of ``runs`` (consecutive jobs of one entry together): how many of
    its runs are done and, from the wall time its done runs took (the sum of ``wall_s`` over
    each command's rows, the bench's own timing of the run), about how many run-hours are left;
    then a line for them all. An estimate: the done runs' mean times the runs left, whatever
    their arms; an entry with no timed run yet is counted apart."""
    rows_of: dict[Path, list[dict[str, Any]]] = {}
    lines: list[str] = []
    total_h, total_left, untimed = 0.0, 0, []
    for plan, group in itertools.groupby(runs, key=lambda r: r.plan):
        group_runs = list(group)
        walls: list[float] = []
        left = 0
        for r in group_runs:
            rows = rows_of.setdefault(r.log, _log_rows(r.log))
            if not any(row.get("command") == r.command for row in rows):
                left += 1
                continue
            wall = _wall_hours(r, rows)
            if wall is not None:
                walls.append(wall)
        line = f"{plan}: {len(group_runs) - left} of {len(group_runs)} done"
        total_left += left
        if left and walls:
            mean = sum(walls) / len(walls)
            total_h += mean * left
            line += (
                f"; its {len(walls)} timed runs took {mean:.2f} h of wall each on average, so "
                f"about {mean * left:.1f} run-hours are left"
            )
        elif left:
            untimed.append(f"{plan} ({left})")
            line += "; no run timed yet"
        lines.append(line)
    lines.append(
        f"left in all: {total_left} runs; about {total_h:.1f} run-hours in the entries with a "
        f"timed run, {total_h / max(workers, 1):.1f} h with --workers {workers}"
        + (f"; not timed yet: {', '.join(untimed)} runs" if untimed else "")
    )
    return "\n".join(lines)


def _lowest_autogroup_priority(pid: int) -> None:
    """A run starts its own session, so Linux puts it in a new scheduler autogroup where the
    queue's ``nice`` does not reach; give that autogroup nice 19 too, so work beside the queue
    (tests, an editor) keeps the cores it needs. Nothing happens where autogroups do not exist."""
    with contextlib.suppress(OSError):
        Path(f"/proc/{pid}/autogroup").write_text("19")


def frozen_src(code: str, code_dir: Path) -> Path:
    """The commit's ``src`` folder (and ``benchmarks/preflab_bench`` where the commit has it),
    exported once (``git archive``) into ``code_dir``; two
    workers or queue processes exporting the same commit at once both end with the one copy."""
    target = code_dir / code
    if not (target / "src").is_dir():
        code_dir.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".{code}.", dir=code_dir))
        has_bench = (
            subprocess.run(
                ["git", "-C", str(ROOT), "cat-file", "-e", f"{code}:benchmarks/preflab_bench"],
                capture_output=True,
            ).returncode
            == 0
        )
        paths = ["src", "benchmarks/preflab_bench"] if has_bench else ["src"]
        archive = subprocess.run(
            ["git", "-C", str(ROOT), "archive", code, *paths],
            check=True,
            capture_output=True,
        ).stdout
        with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
            tar.extractall(tmp, filter="data")
        try:
            tmp.rename(target)
        except OSError:
            if not (target / "src").is_dir():
                raise
            shutil.rmtree(tmp)  # another worker's copy came first
    return target / "src"


def invocation(run: Run, code_dir: Path) -> tuple[list[str], dict[str, str]]:
    """The command line and environment of one invocation of ``run``: this interpreter running
    ``preflab`` from the frozen commit's ``src`` (first on ``PYTHONPATH``)."""
    env = dict(os.environ)
    src = frozen_src(run.code, code_dir)
    # the frozen commit's benchmarks too (preflab_bench, from the commit that moved them out
    # of src/preflab/bench; an older commit has none and runs its own preflab.bench)
    bench = src.parent / "benchmarks"
    paths = (str(src), str(bench) if (bench / "preflab_bench").is_dir() else None)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (*paths, env.get("PYTHONPATH")) if p)
    argv = [sys.executable, "-m", "preflab.cli.main", *shlex.split(run.command)[1:]]
    return argv, env


def run_invocation(
    argv: list[str], env: dict[str, str], *, out_path: Path, pgid_file: Path, minutes: float
) -> int | None:
    """Run one invocation from the checkout's top in a process group of its own (recorded in
    ``pgid_file`` while it runs); its exit code, or None when ``minutes`` stopped it."""
    out = out_path.open("a")
    proc = subprocess.Popen(
        argv, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
    )
    _lowest_autogroup_priority(proc.pid)
    pgid_file.write_text(str(proc.pid))
    try:
        return proc.wait(timeout=minutes * 60)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGCONT)  # a paused run must see the stop
        # SIGTERM ends the bench at once (its default action): what its last round
        # checkpointed stands, and no row is written for a run that did not finish
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=120)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        return None
    finally:
        pgid_file.unlink(missing_ok=True)
        out.close()


class Queue:
    """Worker threads that take the next command not done and not taken, and run it."""

    def __init__(self, runs: list[Run], args: argparse.Namespace) -> None:
        self.runs = runs
        self.pending = [r for r in runs if not done(r)]
        self.args = args
        self.until: datetime | None = getattr(args, "until", None)
        self.skipped: set[str] = set()  # runs said to be skipped for --until
        self.lock = threading.Lock()
        self.state: Path = args.state_dir
        self.state.mkdir(parents=True, exist_ok=True)

    def say(self, msg: str) -> None:
        with self.lock:
            self._say_unlocked(msg)

    def _say_unlocked(self, msg: str) -> None:
        line = f"{datetime.now(UTC):%Y-%m-%dT%H:%M:%SZ} {msg}"
        with (self.state / "log").open("a") as f:
            f.write(line + "\n")
        sys.stderr.write(line + "\n")

    def take(self) -> Run | None:
        """The next run that is not done, that no live queue process has claimed and that fits
        before ``--until`` (:meth:`fits`; a run that does not stays queued for a later queue);
        None once the queue is drained or nothing left fits."""
        with self.lock:
            for run in list(self.pending):
                if (self.state / DRAIN).exists():
                    return None
                if done(run):
                    self.pending.remove(run)
                    continue
                if not self.fits(run):
                    continue
                self.pending.remove(run)
                if self.claim(run):
                    return run
            return None

    def fits(self, run: Run) -> bool:
        """Whether ``run`` is expected to end before ``--until`` (always, without it): its
        :func:`expected_hours` times :data:`UNTIL_MARGIN` from now. A run that would not is
        skipped, not started: on a machine that goes away, what it did since its last checkpoint
        is lost, and all of it where the checkpoints do not outlive the machine. A run that
        :func:`expected_hours` cannot time counts as one invocation (``--minutes``): it may
        take longer, but a run started closer than that to the deadline would lose its first
        invocation (a round 0 without a checkpoint inside it, say) whatever its length."""
        if self.until is None:
            return True
        hours = expected_hours(run, self.runs)
        if hours is None:
            minutes = getattr(self.args, "minutes", None)
            if minutes is None:
                return True
            hours = minutes / 60
        end = datetime.now(UTC) + timedelta(hours=hours * UNTIL_MARGIN)
        if end <= self.until:
            return True
        if run.command not in self.skipped:
            self.skipped.add(run.command)
            self._say_unlocked(
                f"skip (about {hours:.2f} h, would end after --until {self.until:%H:%M}Z) "
                f"{run.command}"
            )
        return False

    def claim_file(self, run: Run) -> Path:
        return self.state / "claims" / f"{hashlib.sha1(run.command.encode()).hexdigest()}.pid"

    def claim(self, run: Run) -> bool:
        """Claim the run for this process (a file naming it, :func:`_identity`): False while
        another live process holds it, so that two queue processes never run one command at
        once. (An invocation left running by a killed queue is not covered: its run's own lock
        refuses a second trainer, and the queue logs that invocation as failed.)"""
        f = self.claim_file(run)
        f.parent.mkdir(parents=True, exist_ok=True)
        for _ in range(2):
            try:
                fd = os.open(f, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
            except FileExistsError:
                if _alive(f.read_text().strip()):
                    return False
                f.unlink(missing_ok=True)  # its process is gone
                continue
            os.write(fd, _identity(os.getpid()).encode())
            os.close(fd)
            return True
        return False

    def invoke(self, run: Run, worker: int, minutes: float) -> int | None:
        """One invocation of at most ``minutes``; its exit code, or None when the time limit
        stopped it."""
        argv, env = invocation(run, self.args.code_dir)
        return run_invocation(
            argv,
            env,
            out_path=self.state / f"{run.plan}-w{worker}.out",
            pgid_file=self.state / f"w{worker}-{os.getpid()}.pgid",
            minutes=minutes,
        )

    def next_limit(self, first: bool) -> float | None:
        """The limit of a run's next invocation, in minutes: ``--minutes``, cut to what is left
        before ``--until``; None where no further invocation may start: ``--until`` has passed,
        or (for a continuation) the queue is drained. A run stopped so stays at its last
        checkpoint for a later queue, as one stopped by the end of a session does."""
        limit = float(self.args.minutes)
        if not first and (self.state / DRAIN).exists():
            return None
        if self.until is not None:
            left = (self.until - datetime.now(UTC)).total_seconds() / 60
            if left < 1:
                return None
            limit = min(limit, left)
        return limit

    def work(self, worker: int) -> None:
        while (run := self.take()) is not None:
            try:
                self.make(run, worker)
            finally:
                self.claim_file(run).unlink(missing_ok=True)
        self.say(f"w{worker} idle")

    def record_start(self, run: Run) -> None:
        """Append the run's start record (:data:`STARTS`) unless it has one: the first
        invocation of a command is its run's start (a later one resumes it)."""
        with self.lock:
            if run.command in load_starts(self.args.starts):
                return
            self.args.starts.parent.mkdir(parents=True, exist_ok=True)
            with self.args.starts.open("a", encoding="utf-8") as f:
                f.write(start_record(run, datetime.now(UTC), "queue"))

    def make(self, run: Run, worker: int) -> None:
        """Invocations of one run until its row exists, it fails, or the count runs out."""
        self.record_start(run)
        self.say(f"w{worker} start {run.command}")
        for n in range(1, self.args.max_invocations + 1):
            minutes = self.next_limit(first=n == 1)
            if minutes is None:
                why = "drained" if (self.state / DRAIN).exists() else "--until reached"
                self.say(f"w{worker} left at its last checkpoint ({why}): {run.command}")
                return
            rc = self.invoke(run, worker, minutes)
            self.say(f"w{worker} invocation {n} {'time limit' if rc is None else f'rc={rc}'}")
            if done(run):
                self.say(f"w{worker} done {run.command}")
                return
            if rc is not None:  # failed, or ended without a row: not retried blindly
                self.say(f"w{worker} FAILED (see {run.plan}-w{worker}.out) {run.command}")
                return
        self.say(f"w{worker} left unfinished after {n} invocations: {run.command}")

    def run(self) -> None:
        (self.state / DRAIN).unlink(missing_ok=True)
        until = (
            ""
            if self.until is None
            else f", each only if it ends before {self.until:%Y-%m-%dT%H:%M}Z"
        )
        self.say(f"{len(self.pending)} runs to make, {self.args.workers} at a time{until}")
        threads = [
            threading.Thread(target=self.work, args=(w,)) for w in range(1, self.args.workers + 1)
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join()


def ray_options(cpus: float, gpus: float) -> dict[str, Any]:
    """What each invocation declares to Ray (``--cpus-per-run``, ``--gpus-per-run``): the same
    request and checks as a sweep's trials (``preflab.sweep.resources``); no retry by Ray (the
    queue's own invocation count decides what runs again)."""
    from preflab.errors import ConfigError
    from preflab.sweep.resources import TrialResources

    try:
        res = TrialResources(cpus=cpus, gpus=gpus)
    except ConfigError as exc:
        raise SystemExit(str(exc).replace("-per-trial", "-per-run")) from None
    return res.ray_options()


def ray_address(address: str) -> str:
    """``--address`` checked as a sweep's is (``HOST:PORT``, ``ray://HOST:PORT``, ``auto``)."""
    from preflab.errors import ConfigError
    from preflab.sweep.resources import check_address

    try:
        return check_address(address)
    except ConfigError as exc:
        raise SystemExit(str(exc)) from None


def ray_invoke(
    run: Run, worker: int, state: Path, code_dir: Path, minutes: float
) -> tuple[int | None, str]:
    """One invocation in a Ray worker: as :meth:`Queue.invoke`, on whichever node Ray placed it
    (its own interpreter, the shared checkout and code folder); the process group is recorded
    under ``state``/``ray-<host>``. Returns the exit code (None: time limit) and the node."""
    import ray

    host = state / f"ray-{socket.gethostname()}"
    host.mkdir(parents=True, exist_ok=True)
    argv, env = invocation(run, code_dir)
    rc = run_invocation(
        argv,
        env,
        out_path=state / f"{run.plan}-w{worker}.out",
        pgid_file=host / f"w{worker}-{os.getpid()}.pgid",
        minutes=minutes,
    )
    return rc, ray.get_runtime_context().get_node_id()


def _node_misses(paths: list[str]) -> list[str]:
    """On one node: which of ``paths`` it does not see."""
    return [p for p in paths if not Path(p).exists()]


class RayQueue(Queue):
    """The queue on Ray: the same runs, claims, drain and done rule; each invocation a Ray task
    with declared resources, placed by Ray on a local instance or a cluster."""

    def __init__(self, runs: list[Run], args: argparse.Namespace) -> None:
        self.options = ray_options(args.cpus_per_run, args.gpus_per_run)  # before anything
        self.address = ray_address(args.address)
        super().__init__(runs, args)

    def invoke(self, run: Run, worker: int, minutes: float) -> int | None:
        import ray

        task = ray.remote(ray_invoke).options(**self.options)
        rc, node = ray.get(task.remote(run, worker, self.state, self.args.code_dir, minutes))
        self.say(f"w{worker} ran on ray node {node}")
        return rc if rc is None else int(rc)

    def run(self) -> None:
        try:
            import ray
            import ray.cloudpickle
        except ImportError:
            raise SystemExit(
                "--engine ray needs Ray: pip install 'preflab[sweep]' (or 'ray[default]>=2.9,<3')"
            ) from None
        module = sys.modules[__name__]
        if __name__ != "__main__":  # workers cannot import this script: send its code along
            ray.cloudpickle.register_pickle_by_value(module)
        os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
        os.environ.setdefault("RAY_AUTH_MODE", "disabled")
        kwargs: dict[str, Any] = {"include_dashboard": False, "log_to_driver": False}
        temp = ""
        if self.address:
            kwargs["address"] = self.address
        else:
            temp = tempfile.mkdtemp(prefix="preflab-ray-", dir="/tmp")  # short socket paths
            kwargs |= {"_temp_dir": temp, "num_cpus": os.cpu_count() or 1}
        try:
            ray.init(**kwargs)
        except Exception as exc:
            if temp:
                shutil.rmtree(temp, ignore_errors=True)
            where = self.address or "local"
            raise SystemExit(f"cannot start or reach Ray ({where}): {exc}") from None
        try:
            self.check_cluster()
            super().run()
        finally:
            ray.shutdown()
            if temp:
                shutil.rmtree(temp, ignore_errors=True)

    def check_cluster(self) -> None:
        """Before any run: some node can hold one invocation, and every node sees the
        checkout, the state folder and the code folder at the driver's paths."""
        import ray
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        from preflab.errors import ConfigError
        from preflab.sweep.resources import TrialResources

        nodes = [n for n in ray.nodes() if n.get("Alive")]
        try:
            TrialResources(cpus=self.options["num_cpus"], gpus=self.options["num_gpus"]).check_fits(
                [n.get("Resources", {}) for n in nodes]
            )
        except ConfigError as exc:
            raise SystemExit(str(exc).replace("-per-trial", "-per-run")) from None
        self.args.code_dir.mkdir(parents=True, exist_ok=True)
        paths = [
            str(ROOT / "benchmarks" / "run_queue.py"),
            str(self.state),
            str(self.args.code_dir),
        ]
        task = ray.remote(num_cpus=0, max_retries=0)(_node_misses)
        for n in nodes:
            strategy = NodeAffinitySchedulingStrategy(n["NodeID"], soft=False)
            missing = ray.get(task.options(scheduling_strategy=strategy).remote(paths), timeout=120)
            if missing:
                raise SystemExit(
                    f"Ray node {n['NodeID'][:12]} ({n.get('NodeManagerAddress', '?')}) does not "
                    f"see {', '.join(missing)}; put the checkout, --state-dir and --code-dir on a "
                    "folder every node mounts at the same path"
                )
        self.say(
            f"ray: {len(nodes)} node(s), each run asks {self.options['num_cpus']:g} CPU and "
            f"{self.options['num_gpus']:g} GPU"
        )


def make_queue(runs: list[Run], args: argparse.Namespace) -> Queue:
    """Today's local worker threads, or the same queue on Ray (``--engine ray``)."""
    if getattr(args, "engine", "local") == "ray":
        return RayQueue(runs, args)
    if getattr(args, "address", ""):
        raise SystemExit("--address is for --engine ray; add --engine ray or drop --address")
    return Queue(runs, args)


def _identity(pid: int) -> str:
    """``PID BOOT START``: the pid, this boot's id and the process's start time (Linux
    ``/proc``), so that a pid reused after a restart or by a later process is not taken for the
    process that wrote a claim; just the pid where ``/proc`` is missing."""
    try:
        boot = Path("/proc/sys/kernel/random/boot_id").read_text().strip()
        stat = Path(f"/proc/{pid}/stat").read_text()
        start = stat.rsplit(")", 1)[1].split()[19]  # field 22, after the command's name
    except (OSError, IndexError):
        return str(pid)
    return f"{pid} {boot} {start}"


def _alive(claim: str) -> bool:
    """Whether the process that wrote this claim (:func:`_identity`) still runs."""
    try:
        pid = int(claim.split()[0])
        os.kill(pid, 0)
    except (ProcessLookupError, ValueError, IndexError):
        return False
    except PermissionError:
        pass
    return len(claim.split()) == 1 or _identity(pid) == claim


def start_record(run: Run, started: datetime, source: str) -> str:
    """The JSON line of ``run``'s start record (:data:`STARTS`): begun at ``started`` (UTC),
    recorded by ``source``."""
    record = {
        "plan": run.plan,
        "code": run.code,
        "command": run.command,
        "started": f"{started:%Y-%m-%dT%H:%M:%S}+00:00",
        "source": source,
    }
    return json.dumps(record) + "\n"


def transcribe(runs: list[Run], log: Path, starts: Path) -> int:
    """Append a start record (:data:`STARTS`) for each run of ``runs`` that has none and whose
    first ``start`` line is in ``log`` (the queue's own log, ``--state-dir``/``log``, from a
    queue that wrote no records); each record names the log it came from. The number added."""
    first: dict[str, datetime] = {}
    for n, line in enumerate(log.read_text(encoding="utf-8").splitlines(), start=1):
        when, _, rest = line.partition(" ")
        worker, _, rest = rest.partition(" ")
        verb, _, command = rest.partition(" ")
        if not (worker.startswith("w") and verb == "start"):
            continue
        try:
            started = datetime.strptime(when, "%Y-%m-%dT%H:%M:%SZ")
        except ValueError:
            raise SystemExit(
                f"{log}, line {n}: expected '<YYYY-MM-DDTHH:MM:SSZ> w<N> start <command>', as "
                f"the queue writes it, got {line[:80]!r}; mend or remove the line"
            ) from None
        first.setdefault(command, started)
    have = load_starts(starts)
    source = f"queue log {log}, transcribed {datetime.now(UTC):%Y-%m-%dT%H:%M}Z"
    added = [r for r in runs if r.command not in have and r.command in first]
    starts.parent.mkdir(parents=True, exist_ok=True)
    with starts.open("a", encoding="utf-8") as f:
        f.writelines(start_record(r, first[r.command], source) for r in added)
    return len(added)


def signal_running(state: Path, sig: signal.Signals) -> None:
    for f in sorted(state.glob("w*.pgid")):
        try:
            os.killpg(int(f.read_text()), sig)
            sys.stderr.write(f"{sig.name} to process group {f.read_text()} ({f.stem})\n")
        except (ProcessLookupError, ValueError):
            pass


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "verb", choices=["list", "forecast", "run", "pause", "resume", "drain", "transcribe"]
    )
    ap.add_argument("--queue", type=Path, default=QUEUE)
    ap.add_argument("--plan", nargs="*", default=[], help="only these plan entries")
    ap.add_argument("--workers", type=int, default=2, help="runs side by side")
    ap.add_argument("--minutes", type=float, default=55.0, help="one invocation's limit")
    ap.add_argument("--max-invocations", type=int, default=8, help="per run and queue run")
    ap.add_argument(
        "--until",
        default=None,
        help="the UTC time the machine goes away (HH:MM or YYYY-MM-DDTHH:MM): a run starts only "
        f"when its expected wall time (its entry's done runs of the same arm) x {UNTIL_MARGIN} "
        "ends before it; a worker takes the next run that does, and stops when none does",
    )
    ap.add_argument(
        "--starts",
        type=Path,
        default=None,
        help="the start records, one per command, written before its first invocation "
        "(default: results/queue_starts.jsonl beside --queue; preflab_bench._registration "
        "reads them to show that a run began after its entry)",
    )
    ap.add_argument("--state-dir", type=Path, default=STATE)
    ap.add_argument("--code-dir", type=Path, default=STATE / "code")
    ap.add_argument(
        "--engine",
        choices=["local", "ray"],
        default="local",
        help="local: worker threads on this machine (default); ray: each invocation a Ray task",
    )
    ap.add_argument("--address", default="", help="Ray cluster HOST:PORT (--engine ray)")
    ap.add_argument("--cpus-per-run", type=float, default=1.0, help="CPUs a run declares to Ray")
    ap.add_argument("--gpus-per-run", type=float, default=0.0, help="GPUs a run declares to Ray")
    args = ap.parse_args(argv)
    args.starts = args.starts or args.queue.parent / STARTS
    args.until = None if args.until is None else parse_until(args.until, datetime.now(UTC))
    if args.verb in ("pause", "resume"):
        signal_running(args.state_dir, signal.SIGSTOP if args.verb == "pause" else signal.SIGCONT)
        return
    if args.verb == "drain":
        args.state_dir.mkdir(parents=True, exist_ok=True)
        (args.state_dir / DRAIN).touch()
        sys.stderr.write("drained: the running invocations go on; no further run starts\n")
        return
    runs = [r for r in load_queue(args.queue) if not args.plan or r.plan in args.plan]
    if args.verb == "list":
        for plan, group in itertools.groupby(runs, key=lambda r: r.plan):
            group_runs = list(group)
            left = [r for r in group_runs if not done(r)]
            print(f"{plan}: {len(group_runs) - len(left)} of {len(group_runs)} done")
            for r in left:
                print(f"  left: {r.command}")
        return
    if args.verb == "forecast":
        print(forecast(runs, args.workers))
        return
    if args.verb == "transcribe":
        log = args.state_dir / "log"
        if not log.is_file():
            raise SystemExit(f"{log}: no queue log there; name the queue's --state-dir")
        n = transcribe(runs, log, args.starts)
        print(f"{n} start records transcribed from {log} into {args.starts}")
        return
    make_queue(runs, args).run()


if __name__ == "__main__":
    main()
