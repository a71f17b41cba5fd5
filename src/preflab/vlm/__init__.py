"""The vision-language judge (``--source vlm``): rendered frames of two segments, asked of any
OpenAI-compatible chat-completions server (RL-VLM-F's two stages, or one), answers parsed to
p ∈ {1, 0, 0.5} or no answer, cached by the frames' content, tokens and cost counted.

Modules, one job each: :mod:`~preflab.vlm.frames` (which frames, drawn by the studio's
renderers), :mod:`~preflab.vlm.images` (encoding, content hashes, image parts),
:mod:`~preflab.vlm.prompts` (editable templates), :mod:`~preflab.vlm.parse` (verdicts),
:mod:`~preflab.vlm.judge` (the source; tokens, seconds and prices counted by
:mod:`preflab.llm.usage`, shared with the text judge). A run's ``--vlm.*`` options become a
judge in :func:`preflab.assemble.make_vlm_judge`.
"""

from preflab.llm.usage import Prices, UsageMeter, load_prices
from preflab.sources.base import ReportsUsage
from preflab.vlm.frames import FrameSpec, SegmentFrames, key_frame_steps
from preflab.vlm.images import EncodedImage, encode, image_part
from preflab.vlm.judge import VLMJudge
from preflab.vlm.parse import parse_verdict, verdict_to_p
from preflab.vlm.prompts import VLMTemplate

__all__ = [
    "EncodedImage",
    "FrameSpec",
    "Prices",
    "ReportsUsage",
    "SegmentFrames",
    "UsageMeter",
    "VLMJudge",
    "VLMTemplate",
    "encode",
    "image_part",
    "key_frame_steps",
    "load_prices",
    "parse_verdict",
    "verdict_to_p",
]
