"""A request's JSON body is built off the event loop: the loop only sends bytes.

``openai``'s ``AsyncCompletions.create`` walks its arguments against the typed schema and
encodes them to JSON on the event loop; with page images in base64 that is the cost of
serialising megabytes, once per request, and concurrent queries send their requests together
(issue 43, case 8: the loop stalled hundreds of milliseconds under 32 queries). The measure is
the CPU time of the loop's own thread (``time.thread_time``: what the loop did, not what it
waited for, so a loaded CI machine does not move it) against the CPU time one serialisation of
such a body takes in the same thread: on the loop a request cost more than one serialisation
(1.1-1.4 times), off it well under half (0.3-0.4: the kernel copying the bytes it sends, the
reply read).
"""

from __future__ import annotations

import asyncio
import io
import json
import statistics
import time

import numpy as np
import pytest
from llama_index.core.base.llms.types import ChatMessage, ImageBlock, TextBlock
from PIL import Image
from test_async_nonblocking import MODEL, server_process  # noqa: F401  (a fixture)

from llama_index_docmemo import QwenVL
from llama_index_docmemo.llms.wire import wire_request

pytestmark = pytest.mark.slow

REQUESTS = 8
IMAGES = 4
GUIDED = {"type": "object", "properties": {"answer": {"type": "string"}}}
SCHEMA = {"extra_body": {"guided_json": GUIDED}}  # the scripted server wants one


def noise_jpeg(seed: int) -> bytes:
    """A 1400-px JPEG of noise (about 1.5 MB: it compresses to nothing smaller)."""
    pixels = np.random.default_rng(seed).integers(0, 256, (1400, 1000, 3), dtype=np.uint8)
    out = io.BytesIO()
    Image.fromarray(pixels).save(out, format="JPEG", quality=90)
    return out.getvalue()


def messages(seed: int) -> list[ChatMessage]:
    images = [ImageBlock(image=noise_jpeg(seed * IMAGES + n)) for n in range(IMAGES)]
    blocks = [TextBlock(text="Read these pages."), *images]
    return [ChatMessage(role="user", blocks=blocks)]


def test_the_loop_spends_a_fraction_of_one_serialisation_per_request(server_process: str) -> None:  # noqa: F811
    llm = QwenVL(model=MODEL, api_base=server_process, timeout=60, max_retries=0)
    batches = [messages(seed) for seed in range(REQUESTS + 1)]
    body = llm._request(batches[0], stream=False, **SCHEMA)  # noqa: SLF001  (what one request carries)
    timings = []
    for _ in range(3):
        started = time.thread_time()
        encoded = wire_request(body).body
        timings.append(time.thread_time() - started)
    serialise = statistics.median(timings)
    assert len(encoded) > 4_000_000  # megabytes of base64, as pages are

    async def run() -> float:
        await llm.achat(batches[0], **SCHEMA)  # the client made, the SDK's first-call caches filled
        started = time.thread_time()
        replies = await asyncio.gather(*(llm.achat(m, **SCHEMA) for m in batches[1:]))
        assert all(r.message.content for r in replies)
        return (time.thread_time() - started) / REQUESTS

    on_loop = asyncio.run(run())
    assert json.loads(encoded)["guided_json"] == GUIDED  # extra_body in the body
    assert on_loop < 0.6 * serialise, (
        f"the loop spent {1000 * on_loop:.1f} ms of CPU a request, one serialisation of the "
        f"body takes {1000 * serialise:.1f} ms"
    )
