"""App factory for ``uvicorn --factory`` (used by ``preflab studio --workers N``): reads the run
directory and store URL from the environment of the worker process."""

from __future__ import annotations

import json
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

from fastapi import FastAPI

from preflab.studio.app import create_app
from preflab.studio.bootstrap import make_media, open_store
from preflab.studio.config import StudioConfig
from preflab.studio.launch import ENV_INSTANCE

ENV_RUN_DIR = "PREFLAB_STUDIO_RUN_DIR"
ENV_STORE_URL = "PREFLAB_STUDIO_STORE_URL"
ENV_MEDIA = "PREFLAB_STUDIO_MEDIA"
ENV_QUEUE = "PREFLAB_STUDIO_QUEUE"
"""JSON of the StudioConfig fields `preflab studio`'s queue flags set (--repeat-share, ...)."""


def app_from_env() -> FastAPI:
    run = Path(os.environ[ENV_RUN_DIR])
    store = open_store(run, os.environ.get(ENV_STORE_URL) or None)
    media = make_media(store, run) if os.environ.get(ENV_MEDIA, "1") == "1" else None
    queue = json.loads(os.environ.get(ENV_QUEUE) or "{}")
    config = StudioConfig(instance=os.environ.get(ENV_INSTANCE, ""), **queue)
    app = create_app(store, media=media, config=config, run_dir=run)

    @asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        yield
        if media is not None:
            media.close()
        store.close()

    app.router.lifespan_context = lifespan
    return app
