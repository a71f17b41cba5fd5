"""PrefLab Studio backend: a FastAPI app over the feedback store (people judge while training
runs in another process). ``create_app`` builds it; ``preflab studio RUN_DIR`` serves it."""

from preflab.studio.app import create_app
from preflab.studio.config import StudioConfig

__all__ = ["StudioConfig", "create_app"]
