"""A small OpenAI-compatible chat-completions server on 127.0.0.1, for tests and benchmarks.

``ScriptedServer(script)`` answers ``POST /v1/chat/completions``; ``script(request_json,
count)`` returns a :class:`Reply` (HTTP status, content or raw body, delay, headers), so
tests can script normal, malformed, slow and failing answers against a real socket. It
counts requests (``server.requests``) and runs in a background thread::

    with ScriptedServer(lambda req, n: Reply(content="Yes.")) as srv:
        ClientConfig(base_url=srv.base_url)
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Reply:
    """What the server sends back for one request."""

    content: str | None = "Yes."
    """Assistant message content (used when ``body`` is None)."""
    status: int = 200
    """HTTP status code."""
    body: str | None = None
    """Raw response body, sent verbatim instead of a chat-completions JSON (malformed answers)."""
    delay_s: float = 0.0
    """Seconds to wait before answering (timeouts, latency)."""
    headers: dict[str, str] = field(default_factory=dict)
    """Extra headers, e.g. ``{"Retry-After": "0"}``."""
    drip_s: float = 0.0
    """Send the body one byte every ``drip_s`` seconds (a server that never quite stops)."""
    drip_headers: bool = False
    """With ``drip_s``: trickle the status line and headers too, not only the body."""
    raw: bytes | None = None
    """Raw body bytes (invalid UTF-8 and the like), sent instead of ``body``/``content``."""


Script = Callable[[dict[str, Any], int], Reply]


class ScriptedServer:
    """Threaded HTTP server with scripted chat-completions answers; a context manager."""

    def __init__(self, script: Script, *, host: str = "127.0.0.1", port: int = 0) -> None:
        self.script = script
        self.requests = 0
        self.bodies: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:  # quiet
                pass

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", "0"))
                raw = self.rfile.read(length)
                try:
                    req = json.loads(raw or b"{}")
                except ValueError:
                    req = {}
                with outer._lock:
                    outer.requests += 1
                    n = outer.requests
                    outer.bodies.append(req)
                if not self.path.rstrip("/").endswith("/chat/completions"):
                    self._send(404, json.dumps({"error": f"unknown path {self.path}"}), {})
                    return
                reply = outer.script(req, n)
                if reply.delay_s > 0:
                    time.sleep(reply.delay_s)
                if reply.raw is not None:
                    self._send(
                        reply.status, reply.raw, reply.headers, reply.drip_s, reply.drip_headers
                    )
                    return
                body = reply.body if reply.body is not None else completion(req, n, reply.content)
                self._send(reply.status, body, reply.headers, reply.drip_s, reply.drip_headers)

            def _send(
                self,
                status: int,
                body: str | bytes,
                headers: dict[str, str],
                drip_s: float = 0.0,
                drip_headers: bool = False,
            ) -> None:
                data = body if isinstance(body, bytes) else body.encode()
                try:
                    if drip_s > 0 and drip_headers:
                        head = [f"HTTP/1.1 {status} {self.responses.get(status, ('',))[0]}"]
                        head += ["Content-Type: application/json", f"Content-Length: {len(data)}"]
                        head += [f"{name}: {value}" for name, value in headers.items()]
                        data = ("\r\n".join(head) + "\r\n\r\n").encode() + data
                    else:
                        self.send_response(status)
                        self.send_header("Content-Type", "application/json")
                        self.send_header("Content-Length", str(len(data)))
                        for k, v in headers.items():
                            self.send_header(k, v)
                        self.end_headers()
                    if drip_s > 0:
                        for i in range(len(data)):
                            self.wfile.write(data[i : i + 1])
                            self.wfile.flush()
                            time.sleep(drip_s)
                    else:
                        self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (timeout)

        self._httpd = ThreadingHTTPServer((host, port), Handler)
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._httpd.serve_forever, args=(0.02,), daemon=True)

    @property
    def base_url(self) -> str:
        host, port = self._httpd.server_address[:2]
        assert isinstance(host, str)  # an IP socket, not a Unix one
        return f"http://{host}:{port}/v1"

    def start(self) -> ScriptedServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()

    def __enter__(self) -> ScriptedServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def completion(
    req: dict[str, Any], n: int, content: str | None, usage: dict[str, int] | None = None
) -> str:
    """The JSON body of a chat completion answering ``req`` (the ``n``-th request) with
    ``content``, as an OpenAI-compatible server sends it (with ``usage`` when given)."""
    body: dict[str, Any] = {
        "id": f"chatcmpl-{n}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": req.get("model", ""),
        "choices": [
            {
                "index": 0,
                "finish_reason": "stop",
                "message": {"role": "assistant", "content": content},
            }
        ],
    }
    if usage is not None:
        body["usage"] = usage
    return json.dumps(body)
