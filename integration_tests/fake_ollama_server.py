"""A scripted Ollama server on 127.0.0.1 (``/api/chat`` and ``/api/show``), standing in for
``ollama serve`` in tests of LlamaIndex's own ``Ollama`` LLM class.

Requests are the ones the ``ollama`` Python client sends: one JSON object per chat, messages
with a string ``content`` and base64 ``images`` beside it, ``format`` holding the JSON schema
of a structured request, ``options`` with ``num_ctx``. A model that is not a vision model
refuses images as Ollama does (HTTP 400, "this model does not support image input"). Each
request is recorded.
"""

from __future__ import annotations

import base64
import io
import json
import threading
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from PIL import Image


@dataclass
class OllamaRequest:
    """One chat request: its body, its text, the sizes of its images, its ``format`` schema."""

    body: dict[str, Any]
    text: str
    image_sizes: list[tuple[int, int]]
    schema: dict[str, Any] | None


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:  # quiet
        return

    def _send(self, status: int, payload: dict[str, Any]) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_POST(self) -> None:
        fake: FakeOllama = self.server.fake  # type: ignore[attr-defined]
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", "0"))) or b"{}")
        if self.path == "/api/show":
            info = {"general.architecture": "llama", "llama.context_length": fake.context_length}
            self._send(
                200,
                {
                    "modelfile": "",
                    "parameters": "",
                    "template": "",
                    "details": {"format": "gguf", "family": "llama"},
                    "model_info": info,
                    "capabilities": ["completion", *(["vision"] if fake.vision else [])],
                    "modified_at": datetime.now(timezone.utc).isoformat(),
                },
            )
            return
        if self.path != "/api/chat":
            self._send(404, {"error": f"no route {self.path}"})
            return
        if body.get("model") != fake.model:
            self._send(404, {"error": f"model '{body.get('model')}' not found"})
            return
        texts, sizes = [], []
        for message in body.get("messages", []):
            texts.append(message.get("content") or "")
            for data in message.get("images") or []:
                with Image.open(io.BytesIO(base64.b64decode(data))) as image:
                    sizes.append(image.size)
        fmt = body.get("format")
        request = OllamaRequest(
            body, "\n".join(texts), sizes, fmt if isinstance(fmt, dict) else None
        )
        with fake.lock:
            fake.requests.append(request)
        if sizes and not fake.vision:
            self._send(400, {"error": "this model does not support image input"})
            return
        content = fake.reply(request)
        self._send(
            200,
            {
                "model": fake.model,
                "created_at": datetime.now(timezone.utc).isoformat(),
                "message": {"role": "assistant", "content": content},
                "done": True,
                "done_reason": "stop",
                "prompt_eval_count": max(1, len(request.text) // 4),
                "eval_count": max(1, len(content) // 4),
            },
        )


class FakeOllama:
    """A scripted Ollama server; use as a context manager and point ``Ollama(base_url=url)``.

    Args:
        reply: the assistant content for each request.
        model: the model served (a request naming another one gets Ollama's 404).
        vision: whether the model takes images.
        context_length: what ``/api/show`` reports.
    """

    def __init__(
        self,
        reply: Callable[[OllamaRequest], str],
        *,
        model: str = "llava",
        vision: bool = True,
        context_length: int = 32768,
    ) -> None:
        self.reply = reply
        self.model = model
        self.vision = vision
        self.context_length = context_length
        self.requests: list[OllamaRequest] = []
        self.lock = threading.Lock()
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
        self._httpd.daemon_threads = True
        self._httpd.fake = self  # type: ignore[attr-defined]
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}"

    def __enter__(self) -> FakeOllama:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(timeout=5)
