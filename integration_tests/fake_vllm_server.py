"""A scripted OpenAI-compatible chat server on 127.0.0.1, standing in for ``vllm serve``.

It speaks the chat-completions protocol the real ``openai`` client expects, checks every request
the way vLLM would refuse it (model name, message shapes, images decodable as PNG within the size
and count limits, a JSON schema when one is required) and answers from a script. Each request is
recorded for assertions.
"""

from __future__ import annotations

import base64
import io
import json
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from PIL import Image


@dataclass
class Reply:
    """One scripted answer: assistant ``content`` with HTTP 200, or an error ``status``."""

    content: str = ""
    status: int = 200
    delay: float = 0.0
    headers: dict[str, str] = field(default_factory=dict)
    error: str = "scripted error"


@dataclass
class Request:
    """What the server received: the JSON body, its text, the decoded images, any problems."""

    body: dict[str, Any]
    text: str
    image_sizes: list[tuple[int, int]]
    schema: dict[str, Any] | None
    problems: list[str]


Script = list[Reply | Callable[[Request], Reply]]


def _schema_of(body: dict[str, Any]) -> dict[str, Any] | None:
    fmt = body.get("response_format") or {}
    if fmt.get("type") == "json_schema":
        return (fmt.get("json_schema") or {}).get("schema")
    structured = body.get("structured_outputs") or {}
    if isinstance(structured, dict) and structured.get("json"):
        return structured["json"]
    return body.get("guided_json")


def _inspect(body: dict[str, Any], server: FakeVLLM) -> Request:
    problems: list[str] = []
    texts: list[str] = []
    sizes: list[tuple[int, int]] = []
    if body.get("model") != server.model:
        problems.append(f"model {body.get('model')!r} is not served (serving {server.model!r})")
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        problems.append("messages missing")
        messages = []
    for message in messages:
        if message.get("role") not in ("system", "user", "assistant"):
            problems.append(f"bad role {message.get('role')!r}")
        content = message.get("content")
        parts = [{"type": "text", "text": content}] if isinstance(content, str) else content or []
        for part in parts:
            if part.get("type") == "text":
                texts.append(part.get("text", ""))
            elif part.get("type") == "image_url":
                url = (part.get("image_url") or {}).get("url", "")
                prefix = "data:image/png;base64,"
                if not url.startswith(prefix):
                    problems.append(f"image is not a PNG data URL: {url[:40]!r}")
                    continue
                try:
                    with Image.open(io.BytesIO(base64.b64decode(url[len(prefix) :]))) as image:
                        image.load()
                        if image.format != "PNG":
                            problems.append(f"image decodes as {image.format}, not PNG")
                        sizes.append(image.size)
                except Exception as exc:
                    problems.append(f"image does not decode: {exc}")
            else:
                problems.append(f"unexpected content part {part.get('type')!r}")
    if len(sizes) > server.max_images:
        problems.append(
            f"At most {server.max_images} image(s) may be provided in one prompt ({len(sizes)} given)"
        )
    for w, h in sizes:
        if max(w, h) > server.max_side:
            problems.append(f"image {w}x{h} exceeds long side {server.max_side}")
    schema = _schema_of(body)
    if server.require_schema and not (isinstance(schema, dict) and schema.get("properties")):
        problems.append("no JSON schema in response_format / structured_outputs / guided_json")
    return Request(body, "\n".join(texts), sizes, schema, problems)


def _completion(model: str, content: str, prompt_chars: int) -> dict[str, Any]:
    prompt_tokens = max(1, prompt_chars // 4)
    completion_tokens = max(1, len(content) // 4)
    return {
        "id": f"chatcmpl-{uuid.uuid4().hex}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": {
                    "role": "assistant",
                    "content": content,
                    "tool_calls": [],
                    "reasoning_content": None,
                },
                "logprobs": None,
                "finish_reason": "stop",
                "stop_reason": None,
            }
        ],
        "usage": {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
        },
    }


def _error(message: str, status: int) -> dict[str, Any]:
    kind = "BadRequestError" if status < 500 else "InternalServerError"
    return {"object": "error", "message": message, "type": kind, "param": None, "code": status}


class _Handler(BaseHTTPRequestHandler):
    server_version = "fake-vllm/0"
    protocol_version = "HTTP/1.1"

    @property
    def fake(self) -> FakeVLLM:
        return self.server.fake  # type: ignore[attr-defined]

    def log_message(self, format: str, *args: Any) -> None:  # quiet
        return

    def _send(
        self, status: int, payload: dict[str, Any], headers: dict[str, str] | None = None
    ) -> None:
        data = json.dumps(payload).encode()
        try:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            for key, value in (headers or {}).items():
                self.send_header(key, value)
            self.end_headers()
            self.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up (timeout test)

    def do_GET(self) -> None:
        if self.path.rstrip("/") == "/v1/models":
            self._send(
                200, {"object": "list", "data": [{"id": self.fake.model, "object": "model"}]}
            )
        else:
            self._send(404, _error(f"no route {self.path}", 404))

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length", "0"))
        raw = self.rfile.read(length)
        if self.path.rstrip("/") != "/v1/chat/completions":
            self._send(404, _error(f"no route {self.path}", 404))
            return
        try:
            body = json.loads(raw)
        except json.JSONDecodeError:
            self._send(400, _error("body is not JSON", 400))
            return
        request = _inspect(body, self.fake)
        reply = self.fake.record(request)
        if reply.delay:
            time.sleep(reply.delay)
        if request.problems:
            self._send(400, _error("; ".join(request.problems), 400))
        elif reply.status != 200:
            self._send(reply.status, _error(reply.error, reply.status), reply.headers)
        else:
            self._send(
                200, _completion(self.fake.model, reply.content, len(request.text)), reply.headers
            )


class FakeVLLM:
    """A scripted server; use as a context manager, point a client at :attr:`url`.

    Args:
        script: replies in request order; a callable gets the :class:`Request` and returns one.
            When the script runs out, ``default`` answers (a callable or a Reply), else HTTP 500.
        model: the served model name (requests naming another model are refused).
        max_images / max_side: the limits a request must respect.
        require_schema: refuse requests without a JSON schema.
    """

    def __init__(
        self,
        script: Script | None = None,
        *,
        default: Reply | Callable[[Request], Reply] | None = None,
        model: str = "qwen-vl-test",
        max_images: int = 8,
        max_side: int = 1500,
        require_schema: bool = True,
    ) -> None:
        self.script = list(script or [])
        self.default = default
        self.model = model
        self.max_images = max_images
        self.max_side = max_side
        self.require_schema = require_schema
        self.requests: list[Request] = []
        self._lock = threading.Lock()
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
        self._httpd.daemon_threads = True
        self._httpd.fake = self  # type: ignore[attr-defined]
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )

    @property
    def url(self) -> str:
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}/v1"

    @property
    def problems(self) -> list[str]:
        return [p for r in self.requests for p in r.problems]

    def record(self, request: Request) -> Reply:
        with self._lock:
            self.requests.append(request)
            step = self.script.pop(0) if self.script else self.default
        if step is None:
            return Reply(status=500, error="script exhausted")
        return step(request) if callable(step) else step

    def __enter__(self) -> FakeVLLM:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(timeout=5)
