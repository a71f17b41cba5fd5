"""The LLM response cache: one immutable response per prompt hash, kept in the run's store so a
resumed or repeated run asks the model nothing it already asked."""

from __future__ import annotations

import time

from sqlalchemy import insert, select
from sqlalchemy.exc import IntegrityError

from preflab.store import schema as S
from preflab.store.repository import Repository


class LLMCache(Repository):
    """Cached LLM responses by key (the hash of model and prompt); the first answer wins. It is
    the cache an LLM client takes (``get_cached_response`` / ``put_cached_response``)."""

    def get(self, key: str) -> str | None:
        """The cached response for ``key``, or None."""
        with self.db.read() as c:
            r = c.execute(select(S.llm_cache.c.response).where(S.llm_cache.c.key == key)).first()
        return r[0] if r else None

    def put(self, key: str, model: str, prompt: str, response: str) -> None:
        """Cache ``response`` under ``key`` unless the key is cached already (entries are
        immutable)."""
        row = {
            "key": key,
            "model": model,
            "prompt": prompt,
            "response": response,
            "created_at": time.time(),
        }
        try:
            with self.db.write() as c:
                c.execute(insert(S.llm_cache), [row])
        except IntegrityError:
            pass  # already cached (first answer wins)

    def get_cached_response(self, key: str) -> str | None:
        """:meth:`get`, by the name the LLM client's cache protocol uses."""
        return self.get(key)

    def put_cached_response(self, key: str, model: str, prompt: str, response: str) -> None:
        """:meth:`put`, by the name the LLM client's cache protocol uses."""
        self.put(key, model, prompt, response)
