"""Prompt templates with the paper's four parts: preamble, few-shot exemplar, sample, ending.

Templates are plain text files (``prompts/<env>.txt`` ship with the package; pass any path to
use your own). Sections start with a line ``[preamble]``, ``[exemplar]``, ``[sample]`` or
``[ending]``; comment lines (``#``) may precede the first section. ``$state_a`` / ``$state_b`` (and
optionally ``$action``) are replaced by the state descriptions.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from string import Template
from typing import Any

from preflab.errors import ConfigError, DataError
from preflab.rundir.textfiles import read_text_file

SECTIONS = ("preamble", "exemplar", "sample", "ending")
"""The four parts of a prompt, in order (Lee et al. 2023, paper 004 appendix B.1)."""

TEMPLATE_FILES: dict[str, str] = {
    "PrefLab/NoLock-v0": "nolock.txt",
    "PrefLab/Lock-v0": "lock.txt",
    "PrefLab/MultiLock-v0": "multilock.txt",
    "InvertedPendulum-v5": "inverted_pendulum.txt",
    "Reacher-v5": "reacher.txt",
    "Hopper-v5": "hopper.txt",
}
"""Environment id → packaged template file."""

Message = dict[str, str]


@dataclass(frozen=True, kw_only=True)
class PromptTemplate:
    """A four-part prompt; ``render`` fills in the pair of states."""

    preamble: str
    """Environment, task and ranking criterion (sent as the system message)."""
    exemplar: str
    """Few-shot example with reasoning."""
    sample: str
    """The pair to rank; must contain ``$state_a`` and ``$state_b``."""
    ending: str
    """Text that asks for the yes/no answer."""
    name: str = ""
    """Where the template came from (file name), for provenance."""

    def __post_init__(self) -> None:
        for sec in SECTIONS:
            if not getattr(self, sec).strip():
                raise ConfigError(f"prompt template {self.name!r}: section [{sec}] is empty")
        for ph in ("$state_a", "$state_b"):
            if ph not in self.sample:
                raise ConfigError(
                    f"prompt template {self.name!r}: the [sample] section must contain {ph} "
                    "(where the state description goes)"
                )
        try:
            Template(self.sample).substitute(state_a="", state_b="", action="")
        except (KeyError, ValueError) as exc:
            raise ConfigError(
                f"prompt template {self.name!r}: unknown or malformed placeholder in [sample] "
                f"({exc}); "
                "only $state_a, $state_b and $action are filled in (write $$ for a literal $)"
            ) from exc

    @staticmethod
    def parse(text: str, *, name: str = "") -> PromptTemplate:
        """Parse the sectioned text format."""
        parts: dict[str, list[str]] = {}
        current: str | None = None
        for line in text.splitlines():
            stripped = line.strip()
            if stripped.startswith("#") and current is None:
                continue
            if stripped.startswith("[") and stripped.endswith("]") and stripped[1:-1] in SECTIONS:
                current = stripped[1:-1]
                if current in parts:
                    raise ConfigError(
                        f"prompt template {name!r}: section [{current}] appears twice"
                    )
                parts[current] = []
                continue
            if current is None:
                if stripped:
                    raise ConfigError(
                        f"prompt template {name!r}: text before the first section "
                        f"({stripped[:40]!r}); "
                        f"start with one of {['[' + s + ']' for s in SECTIONS]}"
                    )
                continue
            parts[current].append(line)
        missing = [s for s in SECTIONS if s not in parts]
        if missing:
            raise ConfigError(
                f"prompt template {name!r} lacks section(s) {missing}; expected {list(SECTIONS)}"
            )
        return PromptTemplate(**{s: "\n".join(parts[s]).strip() for s in SECTIONS}, name=name)

    @staticmethod
    def load(env_id_or_path: str | Path) -> PromptTemplate:
        """The packaged template of an environment id, or a template file by path."""
        key = str(env_id_or_path)
        if key in TEMPLATE_FILES:
            fname = TEMPLATE_FILES[key]
            text = (
                resources.files("preflab.llm")
                .joinpath("prompts", fname)
                .read_text(encoding="utf-8")
            )
            return PromptTemplate.parse(text, name=fname)
        path = Path(key)
        if path.is_file():  # any file: --llm.template is "a file path", a suffix or none
            return PromptTemplate.parse(
                read_text_file(path, what="prompt template"), name=path.name
            )
        raise ConfigError(
            f"no prompt template for {key!r}: expected an environment id with a packaged template "
            f"({sorted(TEMPLATE_FILES)}) or the path of a template file"
        )

    def render(self, state_a: str, state_b: str, *, action: str = "") -> list[Message]:
        """Chat messages: the preamble as system message, exemplar + sample + ending as user."""
        if not state_a.strip() or not state_b.strip():
            raise DataError("both state descriptions must be non-empty text")
        sample = Template(self.sample).substitute(state_a=state_a, state_b=state_b, action=action)
        user = "\n\n".join([self.exemplar, sample, self.ending])
        return [{"role": "system", "content": self.preamble}, {"role": "user", "content": user}]

    def render_text(self, state_a: str, state_b: str, *, action: str = "") -> str:
        """The whole prompt as one string (preamble, exemplar, sample, ending)."""
        return "\n\n".join(m["content"] for m in self.render(state_a, state_b, action=action))


def prompt_hash(
    messages: Sequence[Mapping[str, Any]],
    *,
    model: str = "",
    temperature: float | None = None,
    sample: int = 0,
) -> str:
    """Stable sha256 of a request: messages, model, temperature and the sample index."""
    payload = {
        "messages": list(messages),
        "model": model,
        "temperature": temperature,
        "sample": sample,
    }
    return hashlib.sha256(
        json.dumps(payload, sort_keys=True, ensure_ascii=False).encode()
    ).hexdigest()


def text_hash(text: str) -> str:
    """sha256 of a response text."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()
