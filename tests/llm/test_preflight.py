"""The judge's server is checked before a run starts: an unreachable server or a refused key is
a one-line ConfigError naming the URL and how to start one; a server that answers (whatever its
/models route says) passes."""

from __future__ import annotations

import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from preflab.config import LLMSourceConfig, TrainConfig
from preflab.config.checks import check_run
from preflab.errors import ConfigError
from preflab.llm.preflight import check_server
from preflab.reward import RewardConfig
from preflab.runs import start_loop
from preflab.testing.llmserver import Reply, ScriptedServer


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_unreachable_server_is_refused_naming_the_url_and_a_server_to_start() -> None:
    url = f"http://127.0.0.1:{_closed_port()}/v1"
    with pytest.raises(ConfigError) as err:
        check_server(url, timeout_s=1.0)
    text = str(err.value)
    assert url in text and "preflab llm serve-fake" in text and "--llm.base-url" in text
    assert "\n" not in text


def test_a_server_without_a_models_route_passes() -> None:
    with ScriptedServer(lambda req, n: Reply()) as srv:  # answers GET with 501
        check_server(srv.base_url)
        assert srv.requests == 0  # no chat request was spent on the check


class _Refuses(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        self.send_response(401)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, format: str, *args: object) -> None:
        pass


def test_a_refused_key_names_the_variable() -> None:
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Refuses)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{httpd.server_address[1]}/v1"
        with pytest.raises(ConfigError, match="MY_KEY"):
            check_server(url, api_key_env="MY_KEY")
    finally:
        httpd.shutdown()
        httpd.server_close()


class _Trickles(BaseHTTPRequestHandler):
    """Sends its status line a byte at a time, then a body that never ends."""

    def do_GET(self) -> None:
        import time

        try:
            for b in b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n\r\n":
                self.wfile.write(bytes([b]))
                self.wfile.flush()
                time.sleep(0.2)
            while True:
                self.wfile.write(b"x" * 65536)
        except OSError:
            pass  # the client gave up

    def log_message(self, format: str, *args: object) -> None:
        pass


def test_a_server_that_trickles_or_never_stops_is_refused_in_time() -> None:
    """The check has one time limit for the whole answer (httpx's timeout is per read, so a
    server sending a byte now and then held it for as long as it liked), and it never reads
    the body (an endless one filled the memory)."""
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Trickles)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{httpd.server_address[1]}/v1"
        with pytest.raises(ConfigError, match="did not answer within 1 s"):
            check_server(url, timeout_s=1.0)
    finally:
        httpd.shutdown()
        httpd.server_close()


def test_llm_run_without_a_server_leaves_no_run_dir(tmp_path: Path) -> None:
    config = TrainConfig(
        env_id="PrefLab/NoLock-v0",
        algo="ppo",
        source="llm",
        reward=RewardConfig(use_actions=False),
        llm=LLMSourceConfig(base_url=f"http://127.0.0.1:{_closed_port()}/v1"),
    )
    with pytest.raises(ConfigError, match="no language-model server answers"):
        start_loop(config, tmp_path / "run")
    assert not (tmp_path / "run").exists()


def test_default_sac_on_discrete_actions_names_the_discrete_learners() -> None:
    config = TrainConfig(env_id="PrefLab/NoLock-v0", source="llm")
    with pytest.raises(ConfigError) as err:
        check_run(config)
    text = str(err.value)
    assert "Use --algo ppo (or a2c" in text and "SAC is the default --algo" in text
