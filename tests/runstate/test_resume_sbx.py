"""Exact resume on the SBX backend (a module of its own, so that it runs beside the SB3 cases
on the other test worker): SIGKILL after PEBBLE's pre-training and the critic reset, resume,
and compare with an uninterrupted run bit for bit; the run then loads for inference."""

from __future__ import annotations

import importlib.util
import os
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from multiprocessing.connection import Client, Connection
from pathlib import Path

import numpy as np
import pytest
import torch

from tests import warm_python
from tests.runstate.test_resume_exact import _command, _final_agent, _metrics, _store_rows

# a mark, not importorskip: importing sbx (JAX, Flax, Optax) at collection costs every test worker
# seconds of CPU, and only the worker that runs this module needs it
pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("sbx") is None, reason="the sbx extra (SBX, JAX) is not installed"
)


SERVER = r"""
import atexit, builtins, gc, os, sys, traceback
from multiprocessing.connection import Listener
import sbx  # JAX, Flax, Optax, once for the module's three runs; no JAX backend yet: no thread
gc.collect()
gc.freeze()  # as tests/warm_freeze.py: the runs' collections leave the imported objects alone
address, key = sys.argv[1], bytes.fromhex(sys.argv[2])
with Listener(address, family="AF_UNIX", authkey=key) as listener:
    print("ready", flush=True)
    with listener.accept() as conn:
        while True:
            try:
                code, argv, env, out, err = conn.recv()
            except EOFError:
                break
            pid = os.fork()
            if pid == 0:  # the run: a process of its own, as tests/warm_python.py's commands
                status = 1
                try:
                    conn.close()
                    for fd, path in ((1, out), (2, err)):
                        f = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
                        os.dup2(f, fd)
                        os.close(f)
                    os.environ.clear()
                    os.environ.update(env)
                    sys.argv = ["-c", *argv]
                    try:
                        exec(compile(code, "<string>", "exec"), {"__name__": "__main__", "__builtins__": builtins})
                        status = 0
                    except SystemExit as e:
                        status = e.code if isinstance(e.code, int) else int(e.code is not None)
                    except BaseException:
                        traceback.print_exc()
                    finally:
                        atexit._run_exitfuncs()
                finally:
                    sys.stdout.flush()
                    sys.stderr.flush()
                    os._exit(status)
            conn.send(os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]))
"""
"""A process forked warm (:mod:`tests.warm_python`) that imports SBX once and forks each run of
the module from there: a run forked from the shared warm server imported SBX (JAX, Flax, Optax)
itself, 2.6 s of CPU each time (that server does not import it: every test worker would pay for
it). Importing JAX starts no thread (``/proc/self/task``) and initialises no backend, so the
forks are as safe as the warm server's; each run is still its own process (pid, environment,
exit status, killed by SIGKILL at its failpoint)."""


@pytest.fixture(scope="module")
def sbx_runs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Connection]:
    address = str(tmp_path_factory.mktemp("sbx-server") / "socket")
    key = os.urandom(16)
    server = warm_python.popen(
        [sys.executable, "-c", SERVER, address, key.hex()],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        first = server.stdout.readline()
        assert first == "ready\n", first + server.stdout.read()[-3000:]
        with Client(address, family="AF_UNIX", authkey=key) as conn:
            yield conn
        server.wait(timeout=60)
    finally:
        server.kill()
        server.wait()


def _run(
    conn: Connection, algo: str, run_dir: Path, mode: str, failpoint: str | None = None
) -> int:
    """tests/runstate/test_resume_exact.py's ``_run``, forked from :data:`SERVER`."""
    args, env = _command(algo, run_dir, mode, failpoint)
    with tempfile.TemporaryDirectory() as d:
        out, err = Path(d) / "out", Path(d) / "err"
        conn.send((args[2], args[3:], env, str(out), str(err)))
        assert conn.poll(240), f"{mode} of {run_dir} did not end in 240 s"
        code: int = conn.recv()
        if code not in (0, -signal.SIGKILL):
            raise AssertionError(err.read_text()[-3000:])
    return code


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory, sbx_runs: Connection) -> Path:
    run = tmp_path_factory.mktemp("ref-sbx") / "run"
    assert _run(sbx_runs, "sbx", run, "train") == 0
    return run


def test_kill_and_resume_equals_uninterrupted(
    reference: Path, tmp_path: Path, sbx_runs: Connection
) -> None:
    run = tmp_path / "run"
    assert _run(sbx_runs, "sbx", run, "train", failpoint="judgements_stored:2") == -signal.SIGKILL
    assert _run(sbx_runs, "sbx", run, "resume") == 0
    assert _store_rows(run) == _store_rows(reference)
    assert _metrics(run) == _metrics(reference)
    got, want = _final_agent(run), _final_agent(reference)
    assert want and got.keys() == want.keys()
    assert all(torch.equal(got[k], want[k]) for k in want)  # the JAX state, bit for bit


def test_the_run_loads_for_inference_with_its_trained_weights(reference: Path) -> None:
    """load_run builds the SBX agent from the run's config and puts its JAX state back."""
    from preflab.runs import load_run
    from preflab.runstate.jaxstate import capture_jax

    run = load_run(reference)
    got, want = capture_jax(run.agent), _final_agent(reference)
    assert got.keys() == want.keys() and all(torch.equal(got[k], want[k]) for k in want)
    action, _ = run.agent.predict(np.zeros(3, np.float32), deterministic=True)
    assert action.shape == (1,)
