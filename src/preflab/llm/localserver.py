"""An OpenAI-compatible chat-completions server for a :class:`LocalModel`
(``preflab llm serve-local``): a real model behind the same HTTP interface as vLLM, Ollama or
llama.cpp's server, for the judge on a machine without one.

Routes:
- ``POST /v1/chat/completions``: ``messages`` (a list of ``{"role", "content"}``), optional
  ``temperature`` (0–2, default 0.7), ``max_tokens`` (default 256) and ``seed``. ``model`` is
  accepted and ignored (one model is served).
- ``GET /v1/models``: the served model.
- ``GET /v1/stats``: requests answered and refused, prompt and generated tokens, and the seconds
  the model spent (what ``preflab bench llm_local`` reads for tokens/s).

Each request is answered from a cleared context with the seed it names, or else with the
server's seed plus the request's number, so the same requests sent one at a time get the same
answers. The model answers one request at a time; concurrent requests wait their turn. A bad
request gets HTTP 400 with an OpenAI-style error body that says what was expected.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse
from starlette.concurrency import run_in_threadpool

from preflab.errors import ConfigError
from preflab.llm.localmodel import LocalModel

MAX_MESSAGES = 64
"""Messages per request at most."""
MAX_TOKENS_LIMIT = 2048
"""The largest ``max_tokens`` accepted."""
DEFAULT_MAX_TOKENS = 256
"""``max_tokens`` when the request names none."""
MAX_BODY_BYTES = 1_000_000
"""Largest request body accepted (HTTP 413 beyond)."""
SEED_MODULUS = 2**31 - 1
"""Seeds are taken modulo this (llama.cpp's sampler seed is 32-bit; its all-ones is 'random')."""


@dataclass
class ServerStats:
    """What the server has done since it started."""

    answered: int = 0
    refused: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    model_seconds: float = 0.0
    truncated: int = 0


class BadRequestError(ValueError):
    """A request the server refuses with HTTP 400 (the message says what was expected)."""


def parse_request(body: Any) -> tuple[list[dict[str, str]], float, int, int | None]:
    """(messages, temperature, max_tokens, seed) of a chat-completions body; BadRequestError else."""
    if not isinstance(body, dict):
        raise BadRequestError("the body must be a JSON object with a 'messages' list")
    msgs = body.get("messages")
    if not isinstance(msgs, list) or not msgs:
        raise BadRequestError("'messages' must be a non-empty list of {'role', 'content'} objects")
    if len(msgs) > MAX_MESSAGES:
        raise BadRequestError(f"at most {MAX_MESSAGES} messages per request, got {len(msgs)}")
    messages = []
    for i, m in enumerate(msgs):
        if (
            not isinstance(m, dict)
            or m.get("role") not in ("system", "user", "assistant")
            or not isinstance(m.get("content"), str)
        ):
            raise BadRequestError(
                f"messages[{i}] must be {{'role': 'system'|'user'|'assistant', 'content': str}}"
            )
        messages.append({"role": m["role"], "content": m["content"]})
    temperature = body.get("temperature", 0.7)
    if (
        isinstance(temperature, bool)
        or not isinstance(temperature, int | float)
        or not 0 <= temperature <= 2
    ):
        raise BadRequestError(f"'temperature' must be a number in [0, 2], got {temperature!r}")
    max_tokens = body.get("max_tokens", DEFAULT_MAX_TOKENS)
    if max_tokens is None:
        max_tokens = DEFAULT_MAX_TOKENS
    if (
        isinstance(max_tokens, bool)
        or not isinstance(max_tokens, int)
        or not 1 <= max_tokens <= MAX_TOKENS_LIMIT
    ):
        raise BadRequestError(
            f"'max_tokens' must be an integer in [1, {MAX_TOKENS_LIMIT}], got {max_tokens!r}"
        )
    seed = body.get("seed")
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int)):
        raise BadRequestError(f"'seed' must be an integer, got {seed!r}")
    return messages, float(temperature), int(max_tokens), seed


def create_app(model: LocalModel, *, seed: int = 0) -> FastAPI:
    """The FastAPI app serving ``model``."""
    app = FastAPI(title=f"PrefLab local judge ({model.name})", docs_url=None, redoc_url=None)
    stats = ServerStats()
    lock = threading.Lock()
    counter = [0]

    def error(status: int, message: str) -> JSONResponse:
        with lock:
            stats.refused += 1
        kind = "invalid_request_error" if status < 500 else "server_error"
        return JSONResponse(
            {"error": {"message": message, "type": kind, "code": status}}, status_code=status
        )

    @app.get("/v1/models")
    def models() -> dict[str, Any]:
        return {
            "object": "list",
            "data": [{"id": model.name, "object": "model", "owned_by": "preflab serve-local"}],
        }

    @app.get("/v1/stats")
    def get_stats() -> dict[str, Any]:
        with lock:
            return dict(stats.__dict__, model=model.name)

    @app.post("/v1/chat/completions")
    async def chat(request: Request) -> JSONResponse:
        raw = await request.body()
        if len(raw) > MAX_BODY_BYTES:
            return error(413, f"the request is larger than {MAX_BODY_BYTES:,} bytes")
        try:
            body = json.loads(raw)
        except ValueError:
            return error(400, "the body must be JSON (a chat-completions request)")
        try:
            messages, temperature, max_tokens, req_seed = parse_request(body)
        except BadRequestError as exc:
            return error(400, str(exc))
        with lock:
            counter[0] += 1
            n = counter[0]
        use_seed = (req_seed if req_seed is not None else seed + n) % SEED_MODULUS
        try:
            out = await run_in_threadpool(
                model.complete,
                messages,
                temperature=temperature,
                max_tokens=max_tokens,
                seed=use_seed,
            )
        except ConfigError as exc:  # the prompt does not fit the model's context
            return error(400, str(exc))
        with lock:
            stats.answered += 1
            stats.prompt_tokens += out.prompt_tokens
            stats.completion_tokens += out.completion_tokens
            stats.model_seconds += out.seconds
            stats.truncated += int(out.truncated)
        return JSONResponse(
            {
                "id": f"chatcmpl-{n}",
                "object": "chat.completion",
                "created": int(time.time()),
                "model": model.name,
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": out.text},
                        "finish_reason": "length" if out.truncated else "stop",
                    }
                ],
                "usage": {
                    "prompt_tokens": out.prompt_tokens,
                    "completion_tokens": out.completion_tokens,
                    "total_tokens": out.prompt_tokens + out.completion_tokens,
                },
            }
        )

    return app


@contextmanager
def serving(model: LocalModel, *, port: int = 0, seed: int = 0) -> Iterator[str]:
    """Serve ``model`` on 127.0.0.1:``port`` (0: a free port) in a background thread; yields
    the base URL (``http://127.0.0.1:PORT/v1``). For tests and benchmarks."""
    import socket

    import uvicorn

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind(("127.0.0.1", port))
    except OSError as exc:
        sock.close()
        raise ConfigError(
            f"cannot serve the local judge on port {port} ({exc.strerror or exc}); choose "
            "another port"
        ) from None
    bound = sock.getsockname()[1]
    server = uvicorn.Server(
        uvicorn.Config(create_app(model, seed=seed), log_level="warning", access_log=False)
    )
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            sock.close()
            raise ConfigError(f"the local judge server did not start on port {bound}")
        time.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{bound}/v1"
    finally:
        server.should_exit = True
        thread.join(timeout=30)
        sock.close()
