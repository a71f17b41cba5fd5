"""Headless Chromium for the studio's browser tests and benchmarks (Debian's /usr/bin/chromium
driven by Playwright; no browser is downloaded)."""

from __future__ import annotations

from typing import Any

CHROMIUM = "/usr/bin/chromium"
"""Debian's Chromium (``apt-get install chromium``; scripts/setup.sh --dev installs it)."""

LAUNCH_ARGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--autoplay-policy=no-user-gesture-required",
)
"""Flags that work on a headless, sandbox-less CI machine; clips may autoplay."""


def launch_chromium(playwright: Any) -> Any:
    """A headless Chromium browser from a started ``sync_playwright()`` object."""
    return playwright.chromium.launch(
        executable_path=CHROMIUM, headless=True, args=list(LAUNCH_ARGS)
    )
