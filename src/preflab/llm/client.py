"""A client for OpenAI-compatible chat-completions servers (vLLM, Ollama, llama.cpp, hosted APIs).

Configured by base URL, model, the name of the environment variable holding the API key, and
temperature. Each attempt has a total time limit (connecting, sending and reading the whole
answer: a server that trickles bytes is cut off there, not only one that goes silent), and
requests are retried a bounded number of times with exponential
backoff (on timeouts, connection errors, HTTP 429 and 5xx; ``Retry-After`` is honoured up to
the backoff cap), run at most ``concurrency`` at a time (threads), and are cached by prompt
hash in any object with ``get_cached_response`` / ``put_cached_response`` (the
:class:`preflab.store.FeedbackStore`, or :class:`MemoryCache`). Each response is cached as
soon as it arrives, so an interrupted run loses nothing and a rerun asks nothing again.

Messages are OpenAI chat messages: ``content`` is a string, or a list of parts (``{"type":
"text", ...}``, ``{"type": "image_url", ...}``) for vision-language models. A caller may give
a request its own cache key and the text kept in the cache for it (:class:`ChatRequest`), so
a request carrying base64 images is cached by the images' content hash, not stored whole.
The server's ``usage`` (prompt and completion tokens) comes back with each result.
"""

from __future__ import annotations

import json
import logging
import os
import ssl
import threading
import time
from collections.abc import Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable
from urllib.parse import urlparse

import httpcore
import httpx

from preflab.errors import ConfigError, SourceError
from preflab.llm.prompts import prompt_hash

log = logging.getLogger(__name__)

ChatMessage = Mapping[str, Any]
"""One chat message: ``{"role": ..., "content": str | list of parts}``."""

LOCAL_HOSTS = frozenset({"127.0.0.1", "localhost", "::1", "0.0.0.0", "[::1]"})


@runtime_checkable
class ResponseCache(Protocol):
    """Where responses are kept by prompt hash (FeedbackStore implements this)."""

    def get_cached_response(self, key: str) -> str | None:
        """The cached response text of ``key``, or None."""
        ...

    def put_cached_response(self, key: str, model: str, prompt: str, response: str) -> None:
        """Store a response (first answer wins)."""
        ...


class MemoryCache:
    """A thread-safe in-memory :class:`ResponseCache` (tests, one-off runs)."""

    def __init__(self) -> None:
        self._data: dict[str, str] = {}
        self._lock = threading.Lock()

    def get_cached_response(self, key: str) -> str | None:
        with self._lock:
            return self._data.get(key)

    def put_cached_response(self, key: str, model: str, prompt: str, response: str) -> None:
        with self._lock:
            self._data.setdefault(key, response)

    def __len__(self) -> int:
        return len(self._data)


@dataclass(frozen=True, kw_only=True)
class ClientConfig:
    """Where and how to ask the language model."""

    base_url: str = "http://127.0.0.1:8000/v1"
    """Server root up to and including the API version, e.g. ``https://api.openai.com/v1``."""
    model: str = "default"
    """Model name sent with every request."""
    api_key_env: str = "OPENAI_API_KEY"
    """Environment variable holding the API key (required unless the server is local)."""
    temperature: float = 0.7
    """Sampling temperature; > 0 so repeated queries can disagree (multi-query confidence)."""
    max_tokens: int | None = 256
    """Cap on generated tokens (None: the server's default)."""
    timeout_s: float = 60.0
    """Time limit of one attempt, seconds: connecting, sending the request and reading the
    whole answer (headers and body). A server that trickles bytes is cut off here and the
    attempt retried like any other timeout."""
    connect_timeout_s: float = 5.0
    """Connection timeout per attempt, seconds (within ``timeout_s``)."""
    max_retries: int = 3
    """Retries after the first attempt (timeouts, connection errors, 429, 5xx)."""
    backoff_s: float = 0.5
    """First retry delay; doubles each retry."""
    backoff_max_s: float = 8.0
    """Cap on one retry delay (also caps Retry-After)."""
    concurrency: int = 8
    """Requests in flight at once."""
    deadline_s: float = 180.0
    """Overall deadline of one request, retries included: a server that sends a byte now and
    then (each read within ``timeout_s``) cannot keep a request alive longer than this."""
    max_response_bytes: int = 1_048_576
    """Largest HTTP body read; a longer answer is an error (not retried)."""
    max_text_chars: int = 8_000
    """Longest answer text kept (in the judgement and the cache); longer answers keep their
    first and last ``max_text_chars // 2`` characters (the verdict is usually at either end)."""

    def __post_init__(self) -> None:
        u = urlparse(self.base_url)
        if u.scheme not in ("http", "https") or not u.netloc:
            raise ConfigError(
                f"base_url must look like http(s)://host[:port]/v1, got {self.base_url!r}"
            )
        if not self.model:
            raise ConfigError("model must be a non-empty model name")
        if self.temperature < 0:
            raise ConfigError(f"temperature must be ≥ 0, got {self.temperature}")
        if self.timeout_s <= 0 or self.connect_timeout_s <= 0:
            raise ConfigError("timeouts must be > 0 seconds")
        if self.max_retries < 0 or self.backoff_s < 0 or self.backoff_max_s < 0:
            raise ConfigError("max_retries and backoff delays must be ≥ 0")
        if self.concurrency < 1:
            raise ConfigError(f"concurrency must be ≥ 1, got {self.concurrency}")
        if self.deadline_s <= 0:
            raise ConfigError(f"deadline_s must be > 0 seconds, got {self.deadline_s}")
        if self.max_response_bytes < 1024 or self.max_text_chars < 100:
            raise ConfigError("max_response_bytes must be ≥ 1024 and max_text_chars ≥ 100")
        if self.max_tokens is not None and self.max_tokens < 1:
            raise ConfigError(f"max_tokens must be ≥ 1 or None, got {self.max_tokens}")

    @property
    def is_local(self) -> bool:
        """True when the server runs on this machine (no API key needed)."""
        return (urlparse(self.base_url).hostname or "") in LOCAL_HOSTS


@dataclass(frozen=True, kw_only=True)
class ChatResult:
    """One request's outcome: the text, or the error that remained after the retries."""

    key: str
    """Prompt hash (cache key)."""
    text: str | None
    """Response text; None when the request failed."""
    cached: bool
    """Served from the cache (no HTTP request)."""
    attempts: int
    """HTTP attempts made (0 when cached)."""
    latency_s: float
    """Wall time of the request including retries."""
    error: str | None = None
    """What went wrong when ``text`` is None."""
    prompt_tokens: int | None = None
    """Prompt tokens the server reported in ``usage`` (None: cached, failed or not reported)."""
    completion_tokens: int | None = None
    """Completion tokens the server reported in ``usage`` (None as for ``prompt_tokens``)."""


@dataclass(frozen=True, kw_only=True)
class ChatRequest:
    """A request with its own cache key: for messages too large to key or keep whole (base64
    images), the caller names the request by content hashes instead."""

    messages: Sequence[ChatMessage]
    """What is sent."""
    key: str
    """Cache key (e.g. :func:`preflab.llm.prompts.prompt_hash` of the messages with each image
    replaced by its content hash)."""
    record: str
    """The prompt text kept in the cache beside the response (provenance)."""


class _Usage:
    """Token counts of one answer (from the body's ``usage``)."""

    __slots__ = ("completion", "prompt")

    def __init__(self, data: object) -> None:
        usage = data.get("usage") if isinstance(data, dict) else None
        usage = usage if isinstance(usage, dict) else {}
        self.prompt = _count(usage.get("prompt_tokens"))
        self.completion = _count(usage.get("completion_tokens"))


MAX_TOKEN_COUNT = 10**12
"""Token counts above this in a response's ``usage`` are not believed (left out)."""


def _count(value: object) -> int | None:
    """A token count from ``usage``: a non-negative int up to :data:`MAX_TOKEN_COUNT`, else
    None (a server's nonsense must not overflow the cost report)."""
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= MAX_TOKEN_COUNT:
        return value
    return None


ERROR_BODY_BYTES = 16_384
"""How much of an error response's body is read (its message; the rest is not needed)."""


class _PermanentError(Exception):
    """A failure that retrying cannot fix (4xx other than 429, malformed body)."""


class ChatClient:
    """Thread-pooled chat-completions client with retries, timeouts and a response cache."""

    def __init__(
        self, config: ClientConfig | None = None, *, cache: ResponseCache | None = None
    ) -> None:
        self.config = config or ClientConfig()
        key = os.environ.get(self.config.api_key_env, "")
        if not key and not self.config.is_local:
            raise ConfigError(
                f"no API key for {self.config.base_url}: set the environment variable "
                f"{self.config.api_key_env} (or point base_url at a local server)"
            )
        headers = {"Content-Type": "application/json"}
        if key:
            headers["Authorization"] = f"Bearer {key}"
        self.cache = cache
        c = self.config
        limits = httpx.Limits(
            max_connections=c.concurrency, max_keepalive_connections=c.concurrency
        )
        self._attempt_end = _AttemptDeadline()
        self._http = httpx.Client(
            base_url=c.base_url.rstrip("/"),
            headers=headers,
            timeout=httpx.Timeout(c.timeout_s, connect=c.connect_timeout_s),
            transport=_deadline_transport(limits, self._attempt_end),
        )
        self._lock = threading.Lock()
        self.http_requests = 0
        """HTTP attempts made so far (retries included)."""

    # ----- lifecycle ----------------------------------------------------------------------
    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> ChatClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ----- requests -----------------------------------------------------------------------
    def key_for(self, messages: Sequence[ChatMessage], sample: int = 0) -> str:
        """Cache key of a request: hash of messages, model, temperature and sample index."""
        return prompt_hash(
            messages, model=self.config.model, temperature=self.config.temperature, sample=sample
        )

    def _post(self, messages: Sequence[ChatMessage], deadline: float) -> tuple[str, _Usage]:
        c = self.config
        body: dict[str, object] = {
            "model": c.model,
            "messages": list(messages),
            "temperature": c.temperature,
        }
        if c.max_tokens is not None:
            body["max_tokens"] = c.max_tokens
        with self._lock:
            self.http_requests += 1
        # every socket operation of this attempt ends by the attempt's total time limit
        self._attempt_end.set(min(time.monotonic() + c.timeout_s, deadline))
        try:
            with self._http.stream("POST", "/chat/completions", json=body) as resp:
                # an error's body is read only as far as its message needs
                limit = c.max_response_bytes if resp.status_code < 300 else ERROR_BODY_BYTES
                chunks, size = [], 0
                for chunk in resp.iter_bytes():
                    size += len(chunk)
                    if size > limit:
                        if resp.status_code >= 300:
                            break
                        raise _PermanentError(
                            f"response from {c.base_url} is larger than "
                            f"{c.max_response_bytes:,} bytes; refusing to read more (raise "
                            "max_response_bytes if intended)"
                        )
                    chunks.append(chunk)
                raw = b"".join(chunks)
        finally:
            self._attempt_end.set(None)
        text = raw.decode("utf-8", errors="replace")
        if resp.status_code == 429 or resp.status_code >= 500:
            raise _RetryableError(f"HTTP {resp.status_code}: {text[:200]}", _retry_after(resp))
        if resp.status_code >= 400:
            raise _PermanentError(
                f"HTTP {resp.status_code} from {c.base_url}/chat/completions: {text[:300]}"
            )
        if resp.status_code >= 300:
            where = resp.headers.get("location", "")
            raise _PermanentError(
                f"HTTP {resp.status_code} from {c.base_url}/chat/completions: the server "
                f"redirects to {where or '(no Location)'}; use that address as base_url "
                "(often https:// instead of http://)"
            )
        try:
            data = json.loads(raw)
            content = data["choices"][0]["message"]["content"]
        except (ValueError, KeyError, IndexError, TypeError, RecursionError) as exc:
            raise _PermanentError(
                f"malformed chat-completions response (expected choices[0].message.content): "
                f"{text[:200]!r}"
            ) from exc
        usage = _Usage(data)
        if content is None:
            return "", usage
        if isinstance(content, list):  # content parts: the text parts, in order
            parts = [p.get("text") for p in content if isinstance(p, dict)]
            if all(isinstance(t, str) for t in parts) and parts:
                content = "".join(t for t in parts if isinstance(t, str))
        if not isinstance(content, str):
            raise _PermanentError(
                "chat-completions content must be a string or a list of text parts, got "
                f"{type(content).__name__}: {text[:200]!r}"
            )
        # an unpaired surrogate (JSON allows the escape) cannot be stored or hashed as UTF-8
        content = content.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
        return cap_text(content, c.max_text_chars), usage

    def _request(
        self, messages: Sequence[ChatMessage]
    ) -> tuple[tuple[str, _Usage] | None, int, str | None]:
        """((text, usage) or None, attempts, error) after at most 1 + max_retries attempts,
        all within the overall deadline."""
        c = self.config
        deadline = time.monotonic() + c.deadline_s
        error = None
        attempt = 0
        for attempt in range(c.max_retries + 1):
            wait = min(c.backoff_max_s, c.backoff_s * 2**attempt)
            try:
                return self._post(messages, deadline), attempt + 1, None
            except _PermanentError as exc:
                return None, attempt + 1, str(exc)
            except _RetryableError as exc:
                error = str(exc)
                if exc.retry_after is not None:
                    wait = min(c.backoff_max_s, exc.retry_after)
            except httpx.TimeoutException as exc:
                if time.monotonic() >= deadline:
                    return (
                        None,
                        attempt + 1,
                        f"no complete answer within the {c.deadline_s} s deadline "
                        f"({type(exc).__name__})",
                    )
                error = f"timeout after {c.timeout_s} s ({type(exc).__name__})"
            except httpx.HTTPError as exc:
                error = f"cannot reach {c.base_url}: {type(exc).__name__}: {exc}"
            except Exception as exc:  # never lose the rest of the batch to one odd answer
                return None, attempt + 1, f"unexpected {type(exc).__name__}: {str(exc)[:200]}"
            if attempt < c.max_retries:
                if time.monotonic() + wait > deadline:
                    return None, attempt + 1, f"deadline of {c.deadline_s} s reached: {error}"
                log.debug("request failed (%s); retry %d in %.2f s", error, attempt + 1, wait)
                time.sleep(wait)
        return None, attempt + 1, f"gave up after {attempt + 1} attempts: {error}"

    def chat(self, messages: Sequence[ChatMessage], *, sample: int = 0) -> ChatResult:
        """One request (cached); raises SourceError if it still fails after the retries."""
        res = self.chat_many([(messages, sample)])[0]
        if res.text is None:
            raise SourceError(f"language model request failed: {res.error}")
        return res

    def chat_many(
        self, requests: Sequence[tuple[Sequence[ChatMessage], int] | ChatRequest]
    ) -> list[ChatResult]:
        """Many requests, ``concurrency`` at a time, in input order: (messages, sample index)
        pairs keyed by :meth:`key_for`, or :class:`ChatRequest` with their own keys.

        Failures are returned as results with ``text=None`` and ``error`` set. Cache reads and
        writes happen on the calling thread, each response as soon as it arrives.
        """
        results: list[ChatResult | None] = [None] * len(requests)
        todo: list[tuple[int, str, Sequence[ChatMessage], str | None]] = []
        for i, req in enumerate(requests):
            if isinstance(req, ChatRequest):
                key, messages, record = req.key, req.messages, req.record
            else:
                messages, sample = req
                key, record = self.key_for(messages, sample), None
            hit = self.cache.get_cached_response(key) if self.cache is not None else None
            if hit is not None:
                results[i] = ChatResult(key=key, text=hit, cached=True, attempts=0, latency_s=0.0)
            else:
                todo.append((i, key, messages, record))
        if todo:
            with ThreadPoolExecutor(max_workers=min(self.config.concurrency, len(todo))) as pool:
                futures = {
                    pool.submit(self._timed, msgs): (i, key, msgs, record)
                    for i, key, msgs, record in todo
                }
                for fut in as_completed(futures):
                    i, key, msgs, record = futures[fut]
                    answer, attempts, error, dt = fut.result()
                    text = usage = None
                    if answer is not None:
                        text, usage = answer
                    if text is not None and self.cache is not None:
                        if record is None:
                            record = json.dumps(list(msgs), ensure_ascii=False)
                        self.cache.put_cached_response(key, self.config.model, record, text)
                    results[i] = ChatResult(
                        key=key,
                        text=text,
                        cached=False,
                        attempts=attempts,
                        latency_s=dt,
                        error=error,
                        prompt_tokens=usage.prompt if usage is not None else None,
                        completion_tokens=usage.completion if usage is not None else None,
                    )
        return [r for r in results if r is not None]

    def _timed(
        self, messages: Sequence[ChatMessage]
    ) -> tuple[tuple[str, _Usage] | None, int, str | None, float]:
        t0 = time.perf_counter()
        try:
            answer, attempts, error = self._request(messages)
        except Exception as exc:  # a failure stays one request's failure
            answer, attempts, error = None, 1, f"unexpected {type(exc).__name__}: {str(exc)[:200]}"
        return answer, attempts, error, time.perf_counter() - t0


class _AttemptDeadline(threading.local):
    """When the current thread's attempt must end (``time.monotonic()``), or None."""

    def __init__(self) -> None:
        self.at: float | None = None

    def set(self, at: float | None) -> None:
        self.at = at

    def clamp(self, timeout: float | None, expired: type[Exception]) -> float | None:
        """``timeout`` shortened to the time left; raises ``expired`` when none is left."""
        if self.at is None:
            return timeout
        left = self.at - time.monotonic()
        if left <= 0:
            raise expired("the attempt's time limit (timeout_s) passed")
        return left if timeout is None else min(timeout, left)


class _DeadlineStream(httpcore.NetworkStream):
    """A socket stream whose every read and write ends by the attempt's time limit, so a server
    that sends one byte now and then cannot stretch an attempt (httpx's read timeout is per
    read)."""

    def __init__(self, stream: httpcore.NetworkStream, end: _AttemptDeadline) -> None:
        self._stream = stream
        self._end = end

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        return self._stream.read(max_bytes, self._end.clamp(timeout, httpcore.ReadTimeout))

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        self._stream.write(buffer, self._end.clamp(timeout, httpcore.WriteTimeout))

    def close(self) -> None:
        self._stream.close()

    def start_tls(
        self,
        ssl_context: ssl.SSLContext,
        server_hostname: str | None = None,
        timeout: float | None = None,
    ) -> httpcore.NetworkStream:
        t = self._end.clamp(timeout, httpcore.ConnectTimeout)
        return _DeadlineStream(self._stream.start_tls(ssl_context, server_hostname, t), self._end)

    def get_extra_info(self, info: str) -> object:
        return self._stream.get_extra_info(info)


class _DeadlineBackend(httpcore.SyncBackend):
    """httpcore's socket backend, its streams bounded by the attempt's time limit."""

    def __init__(self, end: _AttemptDeadline) -> None:
        self._end = end

    def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[httpcore.SOCKET_OPTION] | None = None,
    ) -> httpcore.NetworkStream:
        t = self._end.clamp(timeout, httpcore.ConnectTimeout)
        stream = super().connect_tcp(host, port, t, local_address, socket_options)
        return _DeadlineStream(stream, self._end)


def _deadline_transport(limits: httpx.Limits, end: _AttemptDeadline) -> httpx.HTTPTransport:
    """httpx's transport over a connection pool whose sockets obey ``end``."""
    transport = httpx.HTTPTransport(limits=limits)
    # httpx builds its pool without a way to pass a network backend; rebuild it with ours
    # (same settings as HTTPTransport's own pool for a direct connection).
    transport._pool = httpcore.ConnectionPool(
        ssl_context=httpx.create_ssl_context(),
        max_connections=limits.max_connections,
        max_keepalive_connections=limits.max_keepalive_connections,
        keepalive_expiry=limits.keepalive_expiry,
        network_backend=_DeadlineBackend(end),
    )
    return transport


def cap_text(text: str, limit: int) -> str:
    """``text`` if at most ``limit`` characters, else its first and last ``limit // 2``
    characters around a marker."""
    if len(text) <= limit:
        return text
    half = limit // 2
    return f"{text[:half]}\n[… {len(text) - 2 * half} characters dropped …]\n{text[-half:]}"


class _RetryableError(Exception):
    def __init__(self, msg: str, retry_after: float | None) -> None:
        super().__init__(msg)
        self.retry_after = retry_after


def _retry_after(resp: httpx.Response) -> float | None:
    value = resp.headers.get("retry-after")
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        return None
