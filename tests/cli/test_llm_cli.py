"""`preflab llm serve-fake`: a stand-in judge a user can start; it says loudly that its answers
are scripted, in the terminal and in every answer, and the chat client reads its verdicts."""

from __future__ import annotations

import os
import shlex
import signal
import socket
import subprocess
import sys
import time

import pytest

from preflab.cli.llm import TAG, banner, make_script
from preflab.errors import ConfigError
from preflab.llm import ChatClient, ClientConfig
from preflab.llm.parse import parse_answer
from preflab.llm.preflight import check_server


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _wait_for_line(proc: subprocess.Popen[str], text: str, timeout_s: float = 60) -> str:
    seen = ""
    end = time.monotonic() + timeout_s
    assert proc.stderr is not None
    while time.monotonic() < end:
        line = proc.stderr.readline()
        if not line and proc.poll() is not None:
            break
        seen += line
        if text in line:
            return seen
    raise AssertionError(f"{text!r} never printed; got:\n{seen}")


def test_serve_fake_answers_chat_completions_and_says_it_is_a_stand_in() -> None:
    port = _free_port()
    cmd = [sys.executable, "-m", "preflab.cli.main", "llm", "serve-fake", "--port", str(port)]
    cmd += ["--mode", "alternate"]
    proc = subprocess.Popen(cmd, stderr=subprocess.PIPE, text=True, env=os.environ.copy())
    try:
        banner = _wait_for_line(proc, "stop with Ctrl-C")
        assert "SCRIPTED, not a language model's" in banner
        url = f"http://127.0.0.1:{port}/v1"
        assert url in banner
        check_server(url)
        with ChatClient(ClientConfig(base_url=url)) as client:
            texts = [client.chat([{"role": "user", "content": f"q{i}"}]).text for i in range(3)]
        assert all(t is not None and TAG in t for t in texts)
        assert [parse_answer(t) for t in texts] == ["yes", "yes", "no"]
    finally:
        proc.send_signal(signal.SIGINT)
        _out, err = proc.communicate(timeout=30)
    assert proc.returncode == 0 and "stopped after 3 scripted answers" in err


def test_modes_script_the_verdicts() -> None:
    assert parse_answer(make_script("yes")({}, 1).content) == "yes"
    assert parse_answer(make_script("no")({}, 1).content) == "no"
    assert parse_answer(make_script("empty")({}, 1).content) is None
    assert parse_answer(make_script("garbage")({}, 1).content) is None
    coin = make_script("random", seed=3)
    answers = {parse_answer(coin({}, n).content) for n in range(1, 40)}
    assert answers == {"yes", "no"}
    with pytest.raises(ConfigError, match="--mode"):
        make_script("clever")


def test_printed_train_command_is_one_train_accepts() -> None:
    """The `preflab train` line serve-fake prints (serve-local prints the same,
    preflab.cli.llm.train_command) passes train's parser and every check a run must pass
    before it starts, the judge's server answering included, without training."""
    from preflab.cli.train import parse_args
    from preflab.config.checks import check_run
    from preflab.testing.llmserver import ScriptedServer

    server = ScriptedServer(make_script("yes"))
    server.start()
    try:
        lines = banner(server.base_url, "yes").splitlines()
        argv = shlex.split(next(ln for ln in lines if "preflab train" in ln))
        assert argv[:2] == ["preflab", "train"]
        _known, config, _run_dir = parse_args(argv[2:])
        assert (config.source, config.llm.base_url) == ("llm", server.base_url)
        check_run(config)  # the sources' constraints (a ConfigError) and the judge's server
    finally:
        server.stop()


@pytest.mark.parametrize("command", ["serve-fake", "serve-local"])
@pytest.mark.parametrize("port", ["99999", "65536", "-1"])
def test_serve_refuses_a_port_out_of_range(
    command: str, port: str, capsys: pytest.CaptureFixture[str]
) -> None:
    from preflab.cli.main import main

    assert main(["llm", command, "--port", port]) == 1
    err = capsys.readouterr().err
    assert f"error: --port must be in 1..65535, got {port}" in err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1
