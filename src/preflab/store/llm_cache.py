"""The LLM response cache: one immutable response per prompt hash, kept in the run's store so a
resumed or repeated run asks the model nothing it already asked."""

from __future__ import annotations

import time

from sqlalchemy import Engine, insert, select
from sqlalchemy.exc import IntegrityError

from preflab.store import schema as S


class LLMCache:
    """Cached LLM responses by key (the hash of model and prompt); the first answer wins."""

    def __init__(self, engine: Engine, writer: Engine) -> None:
        self.engine = engine
        """Engine for reads."""
        self.writer = writer
        """Engine for write transactions (see :func:`preflab.store.engine.writer`)."""

    def get(self, key: str) -> str | None:
        """The cached response for ``key``, or None."""
        with self.engine.connect() as c:
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
            with self.writer.begin() as c:
                c.execute(insert(S.llm_cache), [row])
        except IntegrityError:
            pass  # already cached (first answer wins)
