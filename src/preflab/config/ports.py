"""The TCP port options of the commands and the studio (``--port``, ``--studio-port``): checked
in one place."""

from __future__ import annotations

from preflab.errors import ConfigError


def check_port(port: int, *, flag: str = "--port", fix: str = "") -> int:
    """``port`` when it is a TCP port (1..65535); else a ConfigError naming ``flag`` with ``fix``
    (how to choose one) after it. Port 0 ("any free port") is refused: a link or command
    printed with it leads nowhere."""
    if not 0 < port < 65536:
        raise ConfigError(f"{flag} must be in 1..65535, got {port}" + (f"; {fix}" if fix else ""))
    return port
