"""What an AI judge's server was asked and what it cost: requests, cache hits, failures, tokens
(from each answer's ``usage``), seconds, and dollars from an optional price table.

A price table is a JSON file mapping model names to prices in US dollars per million tokens::

    {"gpt-4o": {"prompt": 2.50, "completion": 10.00}, "*": {"prompt": 0, "completion": 0}}

(``"*"`` applies to models not listed). The meter's totals are part of the judge's state, so a
resumed run keeps counting; requests answered from the cache cost nothing and are counted as
cache hits.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from preflab.errors import ConfigError
from preflab.llm.client import ChatResult


@dataclass(frozen=True, kw_only=True)
class Prices:
    """US dollars per million tokens."""

    prompt: float
    """Per million prompt (input) tokens."""
    completion: float
    """Per million completion (output) tokens."""


def load_prices(path: str | Path, model: str) -> Prices:
    """``model``'s prices from a price table file (its entry, else ``"*"``)."""
    p = Path(path)
    try:
        table = json.loads(p.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ConfigError(f"cannot read the price table {str(path)!r}: {exc}") from exc
    entry = table.get(model, table.get("*")) if isinstance(table, dict) else None
    if entry is None:
        raise ConfigError(
            f"the price table {str(path)!r} has no entry for model {model!r} (and no '*'); add "
            '{"' + model + '": {"prompt": USD_PER_MTOK, "completion": USD_PER_MTOK}}'
        )
    try:
        prices = Prices(prompt=float(entry["prompt"]), completion=float(entry["completion"]))
    except (KeyError, TypeError, ValueError) as exc:
        raise ConfigError(
            f"price table {str(path)!r}, model {model!r}: expected "
            f'{{"prompt": number, "completion": number}}, got {entry!r}'
        ) from exc
    if not all(math.isfinite(v) and v >= 0 for v in (prices.prompt, prices.completion)):
        raise ConfigError(f"price table {str(path)!r}: prices must be finite and ≥ 0")
    return prices


class UsageMeter:
    """Running totals over every request a judge made."""

    FIELDS = (
        "requests",
        "cached",
        "failed",
        "http_attempts",
        "prompt_tokens",
        "completion_tokens",
        "unreported",
        "seconds",
    )

    def __init__(self, prices: Prices | None = None) -> None:
        self.prices = prices
        self.requests = 0
        """Requests sent to the server (cache hits not included)."""
        self.cached = 0
        """Requests answered from the cache (no HTTP request)."""
        self.failed = 0
        """Requests that failed after their retries."""
        self.http_attempts = 0
        """HTTP attempts, retries included."""
        self.prompt_tokens = 0
        """Prompt tokens the server reported."""
        self.completion_tokens = 0
        """Completion tokens the server reported."""
        self.unreported = 0
        """Answered requests whose ``usage`` had no token counts."""
        self.seconds = 0.0
        """Wall seconds of the requests sent (retries included; concurrent ones add up)."""

    def add(self, result: ChatResult) -> None:
        """Count one result of :meth:`preflab.llm.ChatClient.chat_many`."""
        if result.cached:
            self.cached += 1
            return
        self.requests += 1
        self.http_attempts += result.attempts
        self.seconds += result.latency_s
        if result.text is None:
            self.failed += 1
            return
        if result.prompt_tokens is None and result.completion_tokens is None:
            self.unreported += 1
        self.prompt_tokens += result.prompt_tokens or 0
        self.completion_tokens += result.completion_tokens or 0

    def cost_usd(self) -> float | None:
        """Dollars spent by the price table (None without one)."""
        if self.prices is None:
            return None
        return (
            self.prompt_tokens * self.prices.prompt
            + self.completion_tokens * self.prices.completion
        ) / 1e6

    def report(self) -> dict[str, Any]:
        """The totals, cost included, as summary.json reports them."""
        out: dict[str, Any] = {name: getattr(self, name) for name in self.FIELDS}
        out["seconds"] = round(self.seconds, 3)
        out["cost_usd"] = self.cost_usd()
        return out

    def state(self) -> dict[str, Any]:
        """JSON-able totals (checkpoints)."""
        return {name: getattr(self, name) for name in self.FIELDS}

    def load_state(self, state: Mapping[str, Any]) -> None:
        """Continue counting from :meth:`state`."""
        for name in self.FIELDS:
            setattr(self, name, type(getattr(self, name))(state.get(name, 0)))
