"""What a local server receives from the package's LLM is pinned: request bytes, images and
``json_schema``, for gpt-4o, Qwen-VL and a text-only model, through the reader (sync and async)
and a plain streamed chat.

The fixture ``recorded_requests.json`` was recorded from the LLM built on llama-index-llms-openai
(before issue 45); the client written on the ``openai`` SDK must send the same bytes. Each image's
base64 is replaced by its digest, size and format so the fixture stays small and still exact.
Regenerate (only for a deliberate change of the wire format) with
``DOCMEMO_RECORD_REQUESTS=1 pytest tests/test_recorded_requests.py``.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import io
import json
import os
import re
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from llama_index.core.base.llms.types import ChatMessage
from PIL import Image, ImageDraw

from llama_index_docmemo.llms import OpenAICompatible, QwenVL
from llama_index_docmemo.readers.base import PageView, ReaderInput
from llama_index_docmemo.readers.vlm import VLMReader
from llama_index_docmemo.types import PageRef

FIXTURE = Path(__file__).parent / "fixtures" / "recorded_requests.json"
DATA_URL = re.compile(r"data:image/([a-z]+);base64,([A-Za-z0-9+/=]+)")
REPLY = json.dumps({"notes": [], "useful_pages": [1], "irrelevant_pages": [], "missing": []})


def page_image(page: int) -> Image.Image:
    """A page with lines of 'text' (deterministic, larger than every model's image side)."""
    image = Image.new("RGB", (1700, 2200), "white")
    draw = ImageDraw.Draw(image)
    for row in range(40):
        x = 200 + (row * 37 * page) % 1400
        draw.rectangle((100, 100 + row * 50, x, 130 + row * 50), fill="black")
    return image


def _image_digest(match: re.Match[str]) -> str:
    data = base64.b64decode(match.group(2))
    with Image.open(io.BytesIO(data)) as image:
        shape = f"{image.format}:{image.width}x{image.height}"
    return f"data:image/{match.group(1)};sha256={hashlib.sha256(data).hexdigest()[:16]};{shape}"


class _Recorder(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        return

    def _send(self, payload: bytes, content_type: str = "application/json") -> None:
        self.send_response(200)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def do_GET(self) -> None:
        self.server.seen.append({"method": "GET", "path": self.path})  # type: ignore[attr-defined]
        self._send(json.dumps({"object": "list", "data": []}).encode())

    def do_POST(self) -> None:
        raw = self.rfile.read(int(self.headers.get("Content-Length", "0"))).decode()
        body = DATA_URL.sub(_image_digest, raw)
        self.server.seen.append({"method": "POST", "path": self.path, "body": body})  # type: ignore[attr-defined]
        model = json.loads(raw)["model"]
        base = {"id": "chatcmpl-1", "created": 0, "model": model}
        if json.loads(raw).get("stream"):
            chunk = {"object": "chat.completion.chunk", **base}
            delta = {"role": "assistant", "content": "streamed"}
            events = [
                {**chunk, "choices": [{"index": 0, "delta": delta, "finish_reason": None}]},
                {**chunk, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]},
            ]
            text = "".join(f"data: {json.dumps(e)}\n\n" for e in events) + "data: [DONE]\n\n"
            self._send(text.encode(), "text/event-stream")
            return
        message = {"role": "assistant", "content": REPLY}
        completion = {
            "object": "chat.completion",
            **base,
            "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
        }
        self._send(json.dumps(completion).encode())


@pytest.fixture
def server() -> Iterator[ThreadingHTTPServer]:
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Recorder)
    httpd.seen = []  # type: ignore[attr-defined]
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05})
    thread.start()
    yield httpd
    httpd.shutdown()
    thread.join()
    httpd.server_close()


def url(httpd: ThreadingHTTPServer) -> str:
    return f"http://127.0.0.1:{httpd.server_address[1]}/v1"


MODELS: dict[str, Callable[[str], Any]] = {
    "gpt-4o": lambda base: OpenAICompatible(model="gpt-4o", api_base=base, max_retries=0),
    "qwen-vl": lambda base: QwenVL(api_base=base, max_retries=0),
    "text-only": lambda base: OpenAICompatible(
        model="llama-3.1-8b-instruct", api_base=base, multimodal=False, max_retries=0
    ),
}


def reading() -> ReaderInput:
    pages = [
        PageView(
            PageRef("report.pdf", p),
            f"Page {p}. Revenue grew 12 percent in 2023.",
            load_image=lambda p=p: page_image(p),
        )
        for p in (3, 4)
    ]
    return ReaderInput(question="What was revenue growth?", query="revenue", pages=pages)


def exchange(llm: Any) -> None:
    """One reading round sync, one async, then a streamed chat."""
    reader = VLMReader(llm, images="auto")
    reader.read(reading())
    asyncio.run(reader.aread(reading()))
    chunks = list(llm.stream_chat([ChatMessage(role="user", content="Say hi.")]))
    assert chunks[-1].message.content == "streamed"


@pytest.mark.parametrize("name", sorted(MODELS))
def test_the_server_sees_the_recorded_requests(name: str, server: ThreadingHTTPServer) -> None:
    exchange(MODELS[name](url(server)))
    seen = server.seen  # type: ignore[attr-defined]
    recorded = json.loads(FIXTURE.read_text()) if FIXTURE.exists() else {}
    if os.environ.get("DOCMEMO_RECORD_REQUESTS"):
        recorded[name] = seen
        FIXTURE.parent.mkdir(exist_ok=True)
        FIXTURE.write_text(json.dumps(recorded, indent=1, sort_keys=True) + "\n")
    assert seen == recorded[name]
    posts = [json.loads(r["body"]) for r in seen if r["method"] == "POST"]
    images = [r["body"].count("sha256=") for r in seen if r["method"] == "POST"]
    assert images[:2] == ([0, 0] if name == "text-only" else [2, 2])
    assert posts[0]["response_format"]["type"] == "json_schema"
