"""A stand-in vision-language server on 127.0.0.1 that reads the frames it is sent: for tests,
benchmarks of the plumbing and trying ``--source vlm`` without a model. It is not a model.

:class:`FrameJudgeServer` checks every chat-completions request as a real OpenAI-compatible
vision server does and answers HTTP 400 with an OpenAI-style error when one is wrong: messages
with a role and string or list content, parts of type ``text`` or ``image_url``, each image a
``data:image/jpeg|png;base64,`` URL whose base64 decodes, whose bytes open as an image of the
declared format, no larger than ``max_side`` pixels. It keeps each request's decoded images
(``server.images``, (H, W, 3) uint8) and answers from them with a rule on the pixels,
``score(image) -> float``, the mean over a clip's images (the first half of a request's
images is clip 1, the second half clip 2):

- a request with images and no "Answer:" in its text (RL-VLM-F's stage 1) gets a description,
  ``Clip 1 scores 0.412. Clip 2 scores 0.108.``;
- a request without images (stage 2) is answered from the scores in the description it quotes;
- a request with images that asks for "Answer:" (one stage) is answered at once;

the verdict is ``Answer: 1`` / ``Answer: 2`` for the higher score, ``Answer: 0`` within
``tie``. ``usage`` counts words of text plus ``tokens_per_image`` per image (prompt) and words
of the answer (completion). ``accept_images=False`` plays a text-only model (400: "not a
multimodal model").

Run one from the shell with ``python -m preflab.testing.vlmserver --port 8011 --rule
upright`` (``brightness`` or ``upright``: Pendulum's rod above its pivot).
"""

from __future__ import annotations

import argparse
import base64
import binascii
import io
import json
import re
import threading
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from preflab.testing.llmserver import Reply, ScriptedServer, completion

Score = Callable[[np.ndarray], float]
_DATA_URL = re.compile(r"^data:(image/(?:jpeg|png));base64,(.*)$", re.DOTALL)
_FORMATS = {"image/jpeg": "JPEG", "image/png": "PNG"}
_SCORES = re.compile(r"Clip 1 scores (-?[0-9.]+)\. Clip 2 scores (-?[0-9.]+)\.")


def brightness(image: np.ndarray) -> float:
    """Mean pixel value in [0, 1]: the brighter clip wins."""
    return float(np.asarray(image, np.float64).mean() / 255.0)


def upright(image: np.ndarray) -> float:
    """How high Pendulum's rod (red: R − G > 60) stands: its centroid's height above the
    image's middle row (the pivot) over half the image height, in [−1, 1]; 1 upright, −1
    hanging down (Pendulum-v1's reward favours upright)."""
    img = np.asarray(image, np.int64)
    rows = np.nonzero((img[..., 0] - img[..., 1]) > 60)[0]
    if rows.size == 0:
        return 0.0
    half = img.shape[0] / 2
    return float((half - rows.mean()) / half)


RULES: dict[str, Score] = {"brightness": brightness, "upright": upright}
"""Named pixel rules (``--rule``)."""


class BadRequestError(Exception):
    """What a real server would refuse with HTTP 400."""


class FrameJudgeServer:
    """An OpenAI-compatible chat server that validates image parts and answers from pixels;
    a context manager (``base_url``, ``requests``, ``images``, ``bodies``)."""

    def __init__(
        self,
        score: Score = brightness,
        *,
        tie: float = 1e-3,
        accept_images: bool = True,
        max_side: int = 2048,
        tokens_per_image: int = 85,
        host: str = "127.0.0.1",
        port: int = 0,
    ) -> None:
        self.score = score
        self.tie = tie
        self.accept_images = accept_images
        self.max_side = max_side
        self.tokens_per_image = tokens_per_image
        self.images: list[list[np.ndarray]] = []
        """Decoded images of each valid request, in arrival order."""
        self.mimes: list[list[str]] = []
        """Declared content types of each valid request's images."""
        self.refused: list[str] = []
        """Error messages of the requests refused with HTTP 400."""
        self.usage_sent: list[dict[str, int]] = []
        """The ``usage`` of each answer sent."""
        self._lock = threading.Lock()
        self._server = ScriptedServer(self._answer, host=host, port=port)

    # ----- lifecycle ----------------------------------------------------------------------
    @property
    def base_url(self) -> str:
        return self._server.base_url

    @property
    def requests(self) -> int:
        """Requests received (refused ones included)."""
        return self._server.requests

    @property
    def bodies(self) -> list[dict[str, Any]]:
        return self._server.bodies

    def __enter__(self) -> FrameJudgeServer:
        self._server.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.stop()

    # ----- one request --------------------------------------------------------------------
    def _answer(self, req: dict[str, Any], n: int) -> Reply:
        try:
            texts, images, mimes = self._read(req)
        except BadRequestError as exc:
            with self._lock:
                self.refused.append(str(exc))
            body = {"error": {"message": str(exc), "type": "invalid_request_error", "code": 400}}
            return Reply(status=400, body=json.dumps(body))
        with self._lock:
            self.images.append(images)
            self.mimes.append(mimes)
        text = "\n".join(texts)
        if images:
            half = len(images) // 2
            s1 = float(np.mean([self.score(im) for im in images[:half]]))
            s2 = float(np.mean([self.score(im) for im in images[half:]]))
            content = (
                self._verdict(s1, s2)
                if "Answer:" in text
                else f"Clip 1 scores {s1:.3f}. Clip 2 scores {s2:.3f}."
            )
        else:
            m = _SCORES.findall(text)
            content = (
                self._verdict(float(m[-1][0]), float(m[-1][1])) if m else "I cannot see any clips."
            )
        words = len(text.split()) + self.tokens_per_image * len(images)
        usage = {"prompt_tokens": words, "completion_tokens": len(content.split())}
        usage["total_tokens"] = usage["prompt_tokens"] + usage["completion_tokens"]
        with self._lock:
            self.usage_sent.append(usage)
        return Reply(body=completion(req, n, content, usage))

    def _verdict(self, s1: float, s2: float) -> str:
        if abs(s1 - s2) <= self.tie:
            return f"Both clips score about {s1:.3f}.\nAnswer: 0"
        better = 1 if s1 > s2 else 2
        return f"Clip {better} scores higher ({s1:.3f} vs {s2:.3f}).\nAnswer: {better}"

    def _read(self, req: dict[str, Any]) -> tuple[list[str], list[np.ndarray], list[str]]:
        msgs = req.get("messages")
        if not isinstance(msgs, list) or not msgs:
            raise BadRequestError("'messages' must be a non-empty list")
        texts: list[str] = []
        images: list[np.ndarray] = []
        mimes: list[str] = []
        for i, m in enumerate(msgs):
            if not isinstance(m, dict) or m.get("role") not in ("system", "user", "assistant"):
                raise BadRequestError(f"messages[{i}] needs a role of system, user or assistant")
            content = m.get("content")
            if isinstance(content, str):
                texts.append(content)
                continue
            if not isinstance(content, list):
                raise BadRequestError(f"messages[{i}].content must be a string or a list of parts")
            for j, part in enumerate(content):
                where = f"messages[{i}].content[{j}]"
                kind = part.get("type") if isinstance(part, dict) else None
                if kind == "text" and isinstance(part.get("text"), str):
                    texts.append(part["text"])
                elif kind == "image_url":
                    if not self.accept_images:
                        raise BadRequestError(
                            f"{where}: this model is not a multimodal model; image input "
                            "(image_url) is not supported"
                        )
                    image, mime = self._image(part.get("image_url"), where)
                    images.append(image)
                    mimes.append(mime)
                else:
                    raise BadRequestError(f"{where}: unknown content part type {kind!r}")
        return texts, images, mimes

    def _image(self, spec: object, where: str) -> tuple[np.ndarray, str]:
        from PIL import Image, UnidentifiedImageError

        url = spec.get("url") if isinstance(spec, dict) else None
        m = _DATA_URL.match(url) if isinstance(url, str) else None
        if m is None:
            raise BadRequestError(f"{where}: image_url.url must be data:image/jpeg|png;base64,...")
        mime, payload = m.group(1), m.group(2)
        try:
            raw = base64.b64decode(payload, validate=True)
        except (binascii.Error, ValueError) as exc:
            raise BadRequestError(f"{where}: the image's base64 does not decode ({exc})") from exc
        try:
            img = Image.open(io.BytesIO(raw))
            img.load()
        except (UnidentifiedImageError, OSError) as exc:
            raise BadRequestError(
                f"{where}: the image data is not a readable image ({exc})"
            ) from exc
        if img.format != _FORMATS[mime]:
            raise BadRequestError(f"{where}: declared {mime} but the data is {img.format}")
        if max(img.size) > self.max_side:
            raise BadRequestError(f"{where}: image {img.size} exceeds {self.max_side} px")
        return np.asarray(img.convert("RGB")), mime


def main(argv: list[str] | None = None) -> None:
    """Serve until interrupted (``python -m preflab.testing.vlmserver``)."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=8011)
    ap.add_argument("--rule", choices=sorted(RULES), default="brightness")
    args = ap.parse_args(argv)
    with FrameJudgeServer(RULES[args.rule], host=args.host, port=args.port) as srv:
        import logging

        logging.getLogger(__name__).warning("stand-in VLM server at %s", srv.base_url)
        try:
            while True:
                time.sleep(3600)
        except KeyboardInterrupt:
            pass


if __name__ == "__main__":
    main()
