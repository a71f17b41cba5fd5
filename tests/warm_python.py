"""``python -m preflab.cli.main ...`` and ``python -c CODE ...`` for tests, in a process forked
from a warm interpreter instead of a fresh one.

On the 2-core test machine a fresh interpreter spends most of a tiny run importing torch (and
its compiler, which the first optimiser imports), Stable-Baselines3, SQLAlchemy and PrefLab:
10.1 s for a 400-step README run, of which the run is 1.0 s; forked warm, 3.3 s. The tests that
run PrefLab as a user does (the README's commands, kill-and-resume, the CLI) start dozens. Here one
forkserver per test process imports all that once (:data:`PRELOAD`), and every command is a
real process forked from it: its own pid, environment, working directory, file descriptors and
exit status, killed by SIGKILL and interrupted by SIGINT like any other. What it does not have is
a fresh import, so the tests that check what a bare process imports
(``tests/studio/test_light_import.py``, ``tests/test_layering.py``) and the CI's main job keep
starting fresh interpreters.

:func:`run` and :func:`popen` take the argument lists and keywords of :mod:`subprocess` for the
two forms above; any other command goes to :mod:`subprocess` unchanged.
"""

from __future__ import annotations

import atexit
import builtins
import multiprocessing
import multiprocessing.connection
import multiprocessing.forkserver
import os
import signal
import subprocess
import sys
import tempfile
import threading
import types
from collections.abc import Mapping, Sequence
from typing import IO, Any

PRELOAD = (
    "torch",
    "torch._dynamo",  # imported by the first optimiser a run builds (~2 s)
    "stable_baselines3",
    "sqlalchemy",
    "matplotlib.figure",
    "gymnasium",
    "preflab.cli.main",
    "preflab.cli.train",
    "preflab.runs",
    "preflab.assemble",
    "tests.warm_python",
    "tests.warm_cli",  # tyro's caches of `preflab train`'s first parse (0.3 s per command)
    "tests.warm_freeze",  # last: gc.freeze() of all the above (each command forks cheaper)
)
"""What the forkserver imports once. Nothing that starts threads at import, and neither JAX (it
warns when forked after use) nor MuJoCo (it picks its GL backend from the environment at
import, which is each command's own)."""

_CLI = ("-m", "preflab.cli.main")


def _context() -> multiprocessing.context.ForkServerContext:
    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload(list(PRELOAD))
    if getattr(multiprocessing.forkserver._forkserver, "_forkserver_pid", None) is None:
        old = os.environ.get("PYTHONHASHSEED")
        os.environ["PYTHONHASHSEED"] = "0"  # the same string hashes in every command
        try:
            multiprocessing.forkserver.ensure_running()
        finally:
            if old is None:
                os.environ.pop("PYTHONHASHSEED")
            else:
                os.environ["PYTHONHASHSEED"] = old
    return ctx


def _warm_form(args: Sequence[str | os.PathLike[str]]) -> tuple[str, list[str]] | None:
    """('cli', argv) or ('code', argv) when ``args`` is one of the two warm forms, else None."""
    words = [os.fspath(a) for a in args]
    if len(words) < 2 or words[0] != sys.executable:
        return None
    if tuple(words[1:3]) == _CLI:
        return "cli", ["preflab", *words[3:]]
    if words[1] == "-c" and len(words) >= 3:
        return "code", ["-c", *words[2:]]
    return None


Stream = str | multiprocessing.connection.Connection
"""Where a forked command's fd 1 or 2 goes: a connection's fd (a pipe or an open file),
``"null"`` (os.devnull), ``"inherit"`` (the forkserver's) or, for fd 2 only, ``"stdout"``."""


def _child(
    form: str, argv: list[str], cwd: str, env: dict[str, str], out: Stream, err: Stream
) -> None:
    """Runs in the forked process: its fds, environment and directory, then the command."""
    null = os.open(os.devnull, os.O_RDWR)
    os.dup2(null, 0)
    for fd, where in ((1, out), (2, err)):
        if where == "null":
            os.dup2(null, fd)
        elif where == "stdout":
            os.dup2(1, fd)
        elif isinstance(where, multiprocessing.connection.Connection):
            os.dup2(where.fileno(), fd)
            where.close()
    os.close(null)
    os.environ.clear()
    os.environ.update(env)
    os.chdir(cwd)
    try:
        if form == "cli":
            from preflab.cli.main import main

            sys.argv = argv
            sys.exit(main())
        sys.argv = ["-c", *argv[2:]]
        exec(
            compile(argv[1], "<string>", "exec"), {"__name__": "__main__", "__builtins__": builtins}
        )
    finally:
        atexit._run_exitfuncs()  # what a normal exit of a process runs
        sys.stdout.flush()
        sys.stderr.flush()


def _stream(want: int | IO[Any] | None, ctx: Any) -> tuple[Stream, Any]:
    """The child's end of one stream and the parent's (a pipe's read end, or None)."""
    if want == subprocess.PIPE:
        r, w = ctx.Pipe(duplex=False)
        return w, r
    if want == subprocess.DEVNULL:
        return "null", None
    if want == subprocess.STDOUT:
        return "stdout", None
    if want is None:
        return "inherit", None
    if isinstance(want, int):
        return multiprocessing.connection.Connection(os.dup(want)), None
    return multiprocessing.connection.Connection(os.dup(want.fileno())), None


_STARTING = threading.Lock()


def _start(proc: multiprocessing.process.BaseProcess) -> None:
    """``proc.start()`` without multiprocessing's re-import of the caller's ``__main__`` in the
    child (pytest's, or a script's): the command runs as its own ``__main__``."""
    with _STARTING:
        main = sys.modules["__main__"]
        sys.modules["__main__"] = types.ModuleType("__main__")
        try:
            proc.start()
        finally:
            sys.modules["__main__"] = main


class WarmProcess:
    """A command forked from the warm interpreter, with :class:`subprocess.Popen`'s verbs and
    keywords (stdout and stderr: PIPE, DEVNULL, STDOUT, an fd, an open file, or None)."""

    def __init__(
        self,
        args: Sequence[str | os.PathLike[str]],
        *,
        cwd: str | os.PathLike[str] | None = None,
        env: Mapping[str, str] | None = None,
        stdout: int | IO[Any] | None = None,
        stderr: int | IO[Any] | None = None,
        text: bool = False,
    ) -> None:
        form = _warm_form(args)
        if form is None:
            raise ValueError(f"not a warm command: {args!r}")
        self.args = args
        ctx = _context()
        (out, out_r), (err, err_r) = _stream(stdout, ctx), _stream(stderr, ctx)
        self._proc = ctx.Process(
            target=_child,
            args=(
                *form,
                os.fspath(cwd) if cwd is not None else os.getcwd(),
                dict(os.environ if env is None else env),
                out,
                err,
            ),
        )
        _start(self._proc)
        self.pid = self._proc.pid
        for c in (out, err):
            if isinstance(c, multiprocessing.connection.Connection):
                c.close()  # the child has its own copy: EOF when it exits

        def reader(r: Any) -> IO[Any] | None:
            if r is None:
                return None
            stream = os.fdopen(os.dup(r.fileno()), "r" if text else "rb")
            r.close()
            return stream

        self.stdout, self.stderr = reader(out_r), reader(err_r)
        self.returncode: int | None = None

    def poll(self) -> int | None:
        if self.returncode is None and not self._proc.is_alive():
            self._proc.join()
            self.returncode = self._proc.exitcode
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        self._proc.join(timeout)
        if self.poll() is None:
            raise subprocess.TimeoutExpired(list(map(os.fspath, self.args)), timeout or 0.0)
        assert self.returncode is not None
        return self.returncode

    def communicate(self, timeout: float | None = None) -> tuple[Any, Any]:
        """Everything the command writes to its pipes, once it has exited."""
        got: dict[str, Any] = {}

        def drain(name: str, stream: IO[Any] | None) -> None:
            got[name] = stream.read() if stream is not None else None

        threads = [
            threading.Thread(target=drain, args=(n, st), daemon=True)
            for n, st in (("out", self.stdout), ("err", self.stderr))
        ]
        for t in threads:
            t.start()
        self.wait(timeout)
        for t in threads:
            t.join()
        return got["out"], got["err"]

    def send_signal(self, sig: int) -> None:
        if self.poll() is None:
            os.kill(self.pid, sig)

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)


def popen(args: Sequence[str | os.PathLike[str]], **kwargs: Any) -> Any:
    """:class:`WarmProcess` for the warm forms, :class:`subprocess.Popen` otherwise."""
    if _warm_form(args) is None:
        return subprocess.Popen(args, **kwargs)
    return WarmProcess(args, **kwargs)


def run(
    args: Sequence[str | os.PathLike[str]],
    *,
    cwd: str | os.PathLike[str] | None = None,
    env: Mapping[str, str] | None = None,
    capture_output: bool = False,
    text: bool = False,
    timeout: float | None = None,
    check: bool = False,
) -> subprocess.CompletedProcess[Any]:
    """:func:`subprocess.run` of the command, forked from the warm interpreter when it can be."""
    if _warm_form(args) is None:
        return subprocess.run(
            args,
            cwd=cwd,
            env=env,
            capture_output=capture_output,
            text=text,
            timeout=timeout,
            check=check,
        )
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        # files, not pipes: nothing to drain while the command runs
        proc = WarmProcess(
            args,
            cwd=cwd,
            env=env,
            stdout=out if capture_output else None,
            stderr=err if capture_output else None,
        )
        try:
            code = proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            raise
        captured: list[Any] = []
        for f in (out, err):
            f.seek(0)
            data = f.read() if capture_output else None
            captured.append(data.decode() if text and data is not None else data)
    if check and code:
        raise subprocess.CalledProcessError(code, args, *captured)
    return subprocess.CompletedProcess(args, code, *captured)
