"""Prompt templates of the vision-language judge: plain text files a user can edit.

Two shapes ship (``prompts/two_stage.txt``, ``prompts/one_stage.txt``):

- two-stage (RL-VLM-F): ``[system]``, ``[describe]`` (stage 1: the frames of both clips, asks
  what each shows and how they differ for the goal) and ``[compare]`` (stage 2: stage 1's
  text, asks which clip achieves the goal better);
- one-stage: ``[system]`` and ``[ask]`` (the frames and the question in one request).

Comment lines (``#``) may precede the first section. ``$clip_1`` and ``$clip_2`` mark where each
clip's images go (each on its own line); ``$task``, ``$n_frames`` and ``$analysis`` (stage 2
only) are filled in. Messages come in two versions from the same rendering: the one sent (base64
images) and the redacted one (each image as its content hash), which keys the cache and is
kept as provenance.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from string import Template
from typing import Any, Literal

from preflab.errors import ConfigError, DataError
from preflab.rundir.textfiles import read_text_file
from preflab.vlm.images import EncodedImage, image_part

PromptShape = Literal["two-stage", "one-stage"]
PACKAGED: dict[str, str] = {"two-stage": "two_stage.txt", "one-stage": "one_stage.txt"}
"""Prompt shape → packaged template file."""
SECTIONS: dict[str, tuple[str, ...]] = {
    "two-stage": ("system", "describe", "compare"),
    "one-stage": ("system", "ask"),
}
CLIPS = ("$clip_1", "$clip_2")
Message = dict[str, Any]


@dataclass(frozen=True, kw_only=True)
class VLMTemplate:
    """A parsed template: its shape and its sections' text."""

    shape: PromptShape
    """'two-stage' (describe, then compare) or 'one-stage'."""
    sections: dict[str, str]
    """Section name → text."""
    name: str = ""
    """Where it came from (file name), for provenance."""

    def __post_init__(self) -> None:
        for sec in SECTIONS[self.shape]:
            if not self.sections.get(sec, "").strip():
                raise ConfigError(f"vlm prompt {self.name!r}: section [{sec}] is missing or empty")
        frames_sec = "describe" if self.shape == "two-stage" else "ask"
        lines = [ln.strip() for ln in self.sections[frames_sec].splitlines()]
        for clip in CLIPS:
            if lines.count(clip) != 1:
                raise ConfigError(
                    f"vlm prompt {self.name!r}: [{frames_sec}] must have {clip} once, on a line "
                    "of its own (where that clip's frames go)"
                )
        if self.shape == "two-stage" and "$analysis" not in self.sections["compare"]:
            raise ConfigError(
                f"vlm prompt {self.name!r}: [compare] must contain $analysis (stage 1's text)"
            )
        for sec, text in self.sections.items():
            try:
                Template(text).substitute(task="", n_frames="", analysis="", clip_1="", clip_2="")
            except (KeyError, ValueError) as exc:
                raise ConfigError(
                    f"vlm prompt {self.name!r}: unknown or malformed placeholder in [{sec}] "
                    f"({exc}); only $task, $n_frames, $analysis, $clip_1 and $clip_2 are filled "
                    "in (write $$ for a literal $)"
                ) from exc

    @staticmethod
    def parse(text: str, *, name: str = "") -> VLMTemplate:
        """Parse the sectioned text; the shape follows from the sections present."""
        parts: dict[str, list[str]] = {}
        current: str | None = None
        known = {s for secs in SECTIONS.values() for s in secs}
        for line in text.splitlines():
            stripped = line.strip()
            if current is None and (not stripped or stripped.startswith("#")):
                continue
            if stripped.startswith("[") and stripped.endswith("]") and stripped[1:-1] in known:
                current = stripped[1:-1]
                if current in parts:
                    raise ConfigError(f"vlm prompt {name!r}: section [{current}] appears twice")
                parts[current] = []
                continue
            if current is None:
                raise ConfigError(
                    f"vlm prompt {name!r}: text before the first section ({stripped[:40]!r}); "
                    f"start with [system]"
                )
            parts[current].append(line)
        shape: PromptShape = "two-stage" if "describe" in parts else "one-stage"
        return VLMTemplate(
            shape=shape, sections={k: "\n".join(v).strip() for k, v in parts.items()}, name=name
        )

    @staticmethod
    def load(shape: PromptShape, path: str | Path = "") -> VLMTemplate:
        """The packaged template of ``shape``, or the file at ``path`` (which must be of that
        shape)."""
        if shape not in PACKAGED:
            raise ConfigError(f"vlm prompt must be one of {sorted(PACKAGED)}, got {shape!r}")
        if path:
            p = Path(path)
            if not p.is_file():
                raise ConfigError(f"vlm prompt template {str(path)!r} is not a file")
            tpl = VLMTemplate.parse(read_text_file(p, what="vlm prompt template"), name=p.name)
        else:
            text = (
                resources.files("preflab.vlm")
                .joinpath("prompts", PACKAGED[shape])
                .read_text(encoding="utf-8")
            )
            tpl = VLMTemplate.parse(text, name=PACKAGED[shape])
        if tpl.shape != shape:
            raise ConfigError(
                f"vlm prompt template {tpl.name!r} is {tpl.shape} ({sorted(tpl.sections)}), "
                f"but --vlm.prompt is {shape}; pass a template of that shape"
            )
        return tpl

    # ----- rendering ----------------------------------------------------------------------
    def frames_messages(
        self,
        task: str,
        clip_1: Sequence[EncodedImage] | str,
        clip_2: Sequence[EncodedImage] | str,
        *,
        redact: bool = False,
    ) -> list[Message]:
        """Stage 1 of two-stage ([describe]) or the one-stage request ([ask]): each clip as
        images, or as text (described states; the user message is then one string, as
        text-only servers take it)."""
        if not task.strip():
            raise DataError("the task text is empty; say what the agent should do (--task)")
        sec = "describe" if self.shape == "two-stage" else "ask"
        n = max(len(clip_1), len(clip_2))
        if isinstance(clip_1, str) and isinstance(clip_2, str):
            n = max(clip_1.count("\n"), clip_2.count("\n")) + 1
        fill = {"task": task, "n_frames": str(n), "analysis": ""}
        content: list[dict[str, Any]] = []
        text: list[str] = []

        def flush() -> None:
            chunk = Template("\n".join(text)).substitute(fill, clip_1="", clip_2="").strip()
            if chunk:
                content.append({"type": "text", "text": chunk})
            text.clear()

        for line in self.sections[sec].splitlines():
            if line.strip() in CLIPS:
                flush()
                clip = clip_1 if line.strip() == CLIPS[0] else clip_2
                if isinstance(clip, str):
                    content.append({"type": "text", "text": clip})
                else:
                    content.extend(image_part(im, redact=redact) for im in clip)
            else:
                text.append(line)
        flush()
        if all(part["type"] == "text" for part in content):
            joined = "\n".join(part["text"] for part in content)
            return [self._system(), {"role": "user", "content": joined}]
        return [self._system(), {"role": "user", "content": content}]

    def compare_messages(self, task: str, analysis: str) -> list[Message]:
        """Stage 2 of two-stage ([compare]): stage 1's text, no images."""
        if self.shape != "two-stage":
            raise ConfigError("a one-stage prompt has no [compare] stage")
        text = Template(self.sections["compare"]).substitute(
            task=task, n_frames="", analysis=analysis.strip(), clip_1="", clip_2=""
        )
        return [self._system(), {"role": "user", "content": text}]

    def _system(self) -> Message:
        return {"role": "system", "content": self.sections["system"]}
