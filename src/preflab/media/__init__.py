"""Behaviour videos: state capture, replayers, encoding, a priority worker pool and a cache.

``preflab.media.capture`` is light (numpy only) and used by the segment recorder; the rest
(MuJoCo / pygame / ffmpeg) loads only when :class:`MediaService` is used.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from preflab.media.service import ClipInfo, MediaConfig, MediaService

__all__ = ["ClipInfo", "MediaConfig", "MediaService"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        from preflab.media import service

        return getattr(service, name)
    raise AttributeError(f"module 'preflab.media' has no attribute {name!r}")
