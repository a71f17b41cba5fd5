"""PrefLab Studio backend: a FastAPI app over the feedback store (people judge while training
runs in another process). ``create_app`` builds it; ``preflab studio RUN_DIR`` serves it;
``preflab.studio.launch.start_studio_process`` starts it from the trainer. FastAPI is imported
only when the app is built, so the launcher works without the web extra installed here."""

from __future__ import annotations

from typing import Any

from preflab.studio.config import StudioConfig

__all__ = ["StudioConfig", "create_app"]


def __getattr__(name: str) -> Any:
    if name == "create_app":
        from preflab.studio.app import create_app

        return create_app
    raise AttributeError(f"module 'preflab.studio' has no attribute {name!r}")
