"""Is the judge's server there? One quick request before a run starts (:func:`check_server`), so
an unreachable or misaddressed server is refused at once, naming the URL and how to start one,
instead of each request retrying for tens of seconds after the run directory exists.

The check asks ``GET {base_url}/models`` (OpenAI-compatible servers — llama.cpp's
``llama-server``, vLLM, Ollama's ``/v1`` — list their models there) with a short timeout. Any
HTTP answer other than an authentication refusal counts as reachable: a server without a
``/models`` route still answers chat completions.
"""

from __future__ import annotations

import os
import time

import httpx

from preflab.errors import ConfigError
from preflab.llm.client import _AttemptDeadline, _deadline_transport

PREFLIGHT_TIMEOUT_S = 3.0
"""Seconds the check waits for the server (connecting and answering)."""

HOW_TO_START = (
    "start one, e.g. `preflab llm serve-fake` in another terminal (a scripted stand-in, not a "
    "model) or any OpenAI-compatible server (llama.cpp's llama-server, vLLM, or Ollama at "
    "http://127.0.0.1:11434/v1), and pass its address with --llm.base-url"
)
"""The fix the refusal suggests, in CLI terms."""


def check_server(
    base_url: str,
    *,
    api_key_env: str = "OPENAI_API_KEY",
    timeout_s: float = PREFLIGHT_TIMEOUT_S,
    flags: str = "--llm",
) -> None:
    """Raise a :class:`ConfigError` when no server answers at ``base_url`` within
    ``timeout_s`` seconds, or when it refuses the API key; return quietly otherwise.
    ``flags``: the options' prefix the messages name (``--vlm`` for the vision judge)."""
    how = HOW_TO_START.replace("--llm.", f"{flags}.")
    url = base_url.rstrip("/") + "/models"
    key = os.environ.get(api_key_env, "")
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    end = _AttemptDeadline()  # the whole check ends by then, however slowly the server talks
    end.set(time.monotonic() + timeout_s)
    try:
        with (
            httpx.Client(
                timeout=httpx.Timeout(timeout_s),
                headers=headers,
                transport=_deadline_transport(httpx.Limits(), end),
            ) as http,
            http.stream("GET", url) as response,
        ):
            pass  # the status is the answer: the body is never read
    except httpx.TimeoutException:
        raise ConfigError(
            f"the language-model server at {base_url} did not answer within {timeout_s:g} s; "
            f"check that it is running and not overloaded, or {how}"
        ) from None
    except httpx.HTTPError as exc:
        reason = str(exc) or type(exc).__name__
        raise ConfigError(
            f"no language-model server answers at {base_url} ({reason}); {how}"
        ) from None
    if response.status_code in (401, 403):
        raise ConfigError(
            f"the language-model server at {base_url} refused the API key (HTTP "
            f"{response.status_code}); set the environment variable {api_key_env} to a valid "
            f"key (or name another variable with {flags}.api-key-env)"
        )
