"""Text files a user gives (prompt templates, consent and instruction texts, a dataset's
metadata): read as UTF-8, each failure a ConfigError naming the file."""

from __future__ import annotations

from pathlib import Path

from preflab.errors import ConfigError


def read_text_file(path: str | Path, *, what: str) -> str:
    """The text of a file the user gives (a prompt template, a consent text, ...): UTF-8, a
    byte-order mark (as Windows Notepad saves) accepted. A :class:`ConfigError` names the file
    and ``what`` it is when it cannot be read or is not UTF-8 text."""
    p = Path(path)
    try:
        return p.read_bytes().decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise ConfigError(
            f"{what} {p} is not UTF-8 text (byte {exc.start} cannot be decoded); it must be "
            "UTF-8 text: convert it (e.g. iconv -f latin1 -t utf-8 OLD > NEW)"
        ) from exc
    except IsADirectoryError as exc:
        raise ConfigError(f"{what} {p} is a folder; pass the file itself") from exc
    except OSError as exc:
        raise ConfigError(f"cannot read {what} {p}: {exc.strerror or exc}") from exc
