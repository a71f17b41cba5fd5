"""The vision-language judge as a run's config describes it (``--source vlm``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from preflab.llm.client import ChatClient, ClientConfig, ResponseCache
from preflab.llm.usage import load_prices
from preflab.vlm.frames import FrameSpec
from preflab.vlm.judge import VLMJudge
from preflab.vlm.prompts import VLMTemplate

if TYPE_CHECKING:
    from preflab.config import VLMOptions


def make_vlm_judge(options: VLMOptions, *, task: str, cache: ResponseCache | None) -> VLMJudge:
    """A :class:`VLMJudge` from ``--vlm.*`` options, caching answers in ``cache`` (the run's
    store)."""
    o = options
    client = ChatClient(
        ClientConfig(
            base_url=o.base_url,
            model=o.model,
            api_key_env=o.api_key_env,
            temperature=o.temperature,
            max_tokens=o.max_tokens,
            concurrency=o.concurrency,
            timeout_s=o.timeout_s,
            deadline_s=max(o.timeout_s * 3, 180.0),
        ),
        cache=cache,
    )
    return VLMJudge(
        client,
        task=task,
        template=VLMTemplate.load(o.prompt, o.template),
        frames=FrameSpec(
            count=o.frames,
            size=o.image_size,
            format=o.format,
            layout=o.layout,
            jpeg_quality=o.jpeg_quality,
        ),
        samples=o.samples,
        view=o.view,
        prices=load_prices(o.prices, o.model) if o.prices else None,
    )
