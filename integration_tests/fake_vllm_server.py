"""A scripted OpenAI-compatible chat server on 127.0.0.1, standing in for ``vllm serve``.

It speaks the chat-completions protocol the real ``openai`` client expects, checks every request
the way vLLM would refuse it (model name, message shapes, images decodable as their data URL's
PNG, JPEG or WebP within the size
and count limits, a JSON schema when one is required) and answers from a script. Each request is
recorded for assertions.

``flavour`` makes it refuse structured-output forms as other servers document (or, for
llama.cpp, as the real server was seen to answer): "vllm" takes every form; "llama_cpp" refuses
``json_schema`` with HTTP 500 and a validation message and takes ``json_object`` + ``schema``;
"openai" and "ollama" take ``json_schema`` and refuse vLLM's own fields. ``context_window``
refuses prompts longer than that many tokens (counted as characters / ``chars_per_token``) with
the OpenAI-style overflow message llama-cpp-python and vLLM send. ``Reply(trickle=s)`` sends the
body one byte every ``s`` seconds; a request with ``"stream": true`` is answered as server-sent
events, a word a chunk (``Reply(endless=s)``: then a chunk every ``s`` seconds, never ending).
``Reply(body=b"...", content_type=...)`` sends those bytes as they are (HTTP ``status``), for
replies no real server should send: HTML, truncated JSON, empty choices, any bytes at all.
"""

from __future__ import annotations

import base64
import io
import json
import re
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
    trickle: float = 0.0
    param: str | None = None  # the request field the error names (OpenAI's and vLLM's ``param``)
    body: bytes | None = None
    content_type: str = "application/json"
    endless: float = 0.0


@dataclass
class Request:
    """What the server received: the JSON body, its text, the decoded images (sizes and
    formats), any problems, and the body's size in bytes."""

    body: dict[str, Any]
    text: str
    image_sizes: list[tuple[int, int]]
    schema: dict[str, Any] | None
    problems: list[str]
    image_formats: list[str] = field(default_factory=list)
    body_bytes: int = 0


Script = list[Reply | Callable[[Request], Reply]]


SHOWN_PAGE = re.compile(r"\[(\d+)\] (\S+\.pdf), page (\d+)")
"""A page as the reader's prompt numbers it: ``[n] file.pdf, page p``."""


def gold_reading(text: str, gold: set[tuple[str, int]], *, refined: str) -> str:
    """A scripted reader's JSON for the prompt ``text``: the shown pages in ``gold`` (file name,
    page) are useful with the note "retail margin 12 percent", answered "12 percent" once one is
    seen; otherwise "need more" with ``refined`` as the next query."""
    shown = {int(n): (d, int(p)) for n, d, p in SHOWN_PAGE.findall(text)}
    useful = [n for n, ref in shown.items() if ref in gold]
    return json.dumps(
        {
            "notes": [{"page": n, "fact": "retail margin 12 percent"} for n in useful],
            "useful_pages": useful,
            "irrelevant_pages": [n for n in shown if n not in useful],
            "missing": [] if useful else ["segment margin table"],
            "status": "answered" if useful else "need_more",
            "answer": "12 percent" if useful else None,
            "refined_query": None if useful else refined,
        }
    )


LLAMA_CPP_REFUSAL = (
    "1 validation error:\n  {'type': 'literal_error', 'loc': ('body', 'response_format', 'type'), "
    "'msg': \"Input should be 'text' or 'json_object'\", 'input': 'json_schema', "
    "'ctx': {'expected': \"'text' or 'json_object'\"}}\n\n  File \"llama_cpp/server/app.py\", "
    "line 376, in create_chat_completion\n    POST /v1/chat/completions"
)
"""What llama-cpp-python 0.3.36 answered (HTTP 500, type internal_server_error) to
``response_format`` of type ``json_schema``, recorded from the real server."""


def _refusal(body: dict[str, Any], flavour: str) -> str | None:
    """The error a server of ``flavour`` sends for this request's structured-output form."""
    fmt = body.get("response_format") or {}
    kind = fmt.get("type")
    if flavour == "llama_cpp" and kind not in (None, "text", "json_object"):
        return LLAMA_CPP_REFUSAL
    if flavour in ("openai", "ollama"):
        for key in ("guided_json", "structured_outputs"):
            if key in body:
                return f"Unrecognized request argument supplied: {key}"
        if kind == "json_object" and "schema" in fmt:
            return "Additional properties are not allowed ('schema' was unexpected) - 'response_format'"
    return None


LLAMA_CPP_LIST_CONTENT = 'can only concatenate str (not "list") to str'
"""What llama-cpp-python 0.3.36's server answers (HTTP 500) to list content with a text
model's chat template (reported in issue 17, from the real server)."""


def _content_refusal(body: dict[str, Any], text_model: str | None, model: str) -> str | None:
    """The error a server with a text-only model sends for list or image content."""
    if text_model is None:
        return None
    parts = [m.get("content") for m in body.get("messages") or []]
    lists = [p for p in parts if isinstance(p, list)]
    if text_model == "llama_cpp" and lists:
        return LLAMA_CPP_LIST_CONTENT
    has_image = any(part.get("type") == "image_url" for p in lists for part in p)
    if text_model == "vllm" and has_image:
        return f"{model} is not a multimodal model None"
    return None


def _schema_of(body: dict[str, Any]) -> dict[str, Any] | None:
    fmt = body.get("response_format") or {}
    if fmt.get("type") == "json_schema":
        return (fmt.get("json_schema") or {}).get("schema")
    if fmt.get("type") == "json_object" and isinstance(fmt.get("schema"), dict):
        return fmt["schema"]
    structured = body.get("structured_outputs") or {}
    if isinstance(structured, dict) and structured.get("json"):
        return structured["json"]
    return body.get("guided_json")


_IMAGE_URL = re.compile(r"data:image/(png|jpeg|webp);base64,")


def _inspect(body: dict[str, Any], server: FakeVLLM, body_bytes: int = 0) -> Request:
    problems: list[str] = []
    texts: list[str] = []
    sizes: list[tuple[int, int]] = []
    formats: list[str] = []
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
                prefix = _IMAGE_URL.match(url)
                if prefix is None:
                    problems.append(f"image is not a PNG/JPEG/WebP data URL: {url[:40]!r}")
                    continue
                said = prefix.group(1).upper()
                try:
                    with Image.open(io.BytesIO(base64.b64decode(url[prefix.end() :]))) as image:
                        image.load()
                        if image.format != said:
                            problems.append(f"image decodes as {image.format}, not {said}")
                        sizes.append(image.size)
                        formats.append(str(image.format))
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
    text = "\n".join(texts)
    if server.require_schema and not (isinstance(schema, dict) and schema.get("properties")):
        in_prompt = "validates against this JSON schema" in text
        if not in_prompt:
            problems.append("no JSON schema in response_format / structured_outputs / guided_json")
    return Request(body, text, sizes, schema, problems, formats, body_bytes)


def _completion(model: str, content: str, prompt_chars: int, usage: bool = True) -> dict[str, Any]:
    prompt_tokens = max(1, prompt_chars // 4)
    completion_tokens = max(1, len(content) // 4)
    counts = {
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion_tokens,
        "total_tokens": prompt_tokens + completion_tokens,
    }
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
        **({"usage": counts} if usage else {}),
    }


def _error(message: str, status: int, param: str | None = None) -> dict[str, Any]:
    kind = "BadRequestError" if status < 500 else "InternalServerError"
    return {"object": "error", "message": message, "type": kind, "param": param, "code": status}


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

    def _trickle(self, payload: dict[str, Any], every: float) -> None:
        """Headers at once, then the body one byte every ``every`` seconds."""
        data = json.dumps(payload).encode()
        try:
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            for i in range(len(data)):
                self.wfile.write(data[i : i + 1])
                self.wfile.flush()
                time.sleep(every)
        except (BrokenPipeError, ConnectionResetError):
            self.fake.trickles_cut += 1  # the client hung up

    def _raw(self, status: int, body: bytes, content_type: str) -> None:
        try:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
        except (BrokenPipeError, ConnectionResetError):
            pass

    def _stream(self, content: str, endless: float = 0.0) -> None:
        """The reply as server-sent events, a word a chunk (``"stream": true``), then [DONE]."""
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Connection", "close")
        self.end_headers()
        self.close_connection = True
        base = {"id": f"chatcmpl-{uuid.uuid4().hex}", "object": "chat.completion.chunk"}
        base |= {"created": int(time.time()), "model": self.fake.model}
        pieces = [w + " " for w in content.split(" ")]
        pieces[-1] = pieces[-1][:-1]
        try:
            for piece in pieces:
                delta = {"role": "assistant", "content": piece}
                chunk = {**base, "choices": [{"index": 0, "delta": delta, "finish_reason": None}]}
                self.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
            while endless:  # until the client hangs up
                delta = {"role": "assistant", "content": " more"}
                chunk = {**base, "choices": [{"index": 0, "delta": delta, "finish_reason": None}]}
                self.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
                self.wfile.flush()
                time.sleep(endless)
            last = {**base, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}
            self.wfile.write(f"data: {json.dumps(last)}\n\ndata: [DONE]\n\n".encode())
            self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError):
            pass

    def do_GET(self) -> None:
        if self.path.rstrip("/") == "/v1/models":
            card = {"id": self.fake.model, "object": "model", **self.fake.model_card}
            self._send(200, {"object": "list", "data": [card]})
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
        request = _inspect(body, self.fake, len(raw))
        refusal = _refusal(body, self.fake.flavour)
        server = self.fake.flavour
        if refusal is None:  # the form is read first, the content after (as llama.cpp does)
            refusal = _content_refusal(body, self.fake.text_model, self.fake.model)
            server = self.fake.text_model or server
        if refusal is not None:
            self.fake.refusals.append(refusal)
            status = 500 if server == "llama_cpp" else 400
            self._send(status, _error(refusal, status))
            return
        overflow = self.fake.overflow(request)
        if overflow is not None:
            self.fake.refusals.append(overflow)
            self._send(400, _error(overflow, 400))
            return
        reply = self.fake.record(request)
        if reply.delay:
            time.sleep(reply.delay)
        if reply.body is not None:
            self._raw(reply.status, reply.body, reply.content_type)
        elif reply.trickle and not request.problems and reply.status == 200:
            self._trickle(_completion(self.fake.model, reply.content, 1), reply.trickle)
        elif request.problems:
            self._send(400, _error("; ".join(request.problems), 400))
        elif reply.status != 200:
            self._send(reply.status, _error(reply.error, reply.status, reply.param), reply.headers)
        elif body.get("stream"):
            self._stream(reply.content, reply.endless)
        else:
            completion = _completion(
                self.fake.model, reply.content, len(request.text), self.fake.usage
            )
            self._send(200, completion, reply.headers)


class FakeVLLM:
    """A scripted server; use as a context manager, point a client at :attr:`url`.

    Args:
        script: replies in request order; a callable gets the :class:`Request` and returns one.
            When the script runs out, ``default`` answers (a callable or a Reply), else HTTP 500.
        model: the served model name (requests naming another model are refused).
        max_images / max_side: the limits a request must respect.
        require_schema: refuse requests without a JSON schema (in a request field, or in
            the prompt as "prompt" mode writes it).
        flavour: "vllm", "llama_cpp", "openai" or "ollama": which structured-output forms
            are refused (see the module docstring).
        context_window: refuse prompts over this many tokens (None: no limit).
        chars_per_token: how this server's "tokenizer" counts.
        text_model: serve a text-only model as "llama_cpp" (HTTP 500 for any list content, as
            llama-cpp-python's chat template fails) or "vllm" (HTTP 400 for images) would.
        usage: report token counts (``usage``: text characters / 4) with each completion;
            False: none, as some servers send.
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
        flavour: str = "vllm",
        context_window: int | None = None,
        chars_per_token: float = 2.0,
        text_model: str | None = None,
        usage: bool = True,
    ) -> None:
        self.script = list(script or [])
        self.default = default
        self.model = model
        self.max_images = max_images
        self.max_side = max_side
        self.require_schema = require_schema
        self.flavour = flavour
        self.context_window = context_window
        self.chars_per_token = chars_per_token
        self.text_model = text_model
        self.usage = usage
        self.refusals: list[str] = []
        self.model_card: dict[str, Any] = {}
        self.trickles_cut = 0
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

    def prompt_tokens(self, request: Request) -> int:
        """This server's token count of a request: text by ``chars_per_token``, 500 per image."""
        return int(len(request.text) / self.chars_per_token) + 500 * len(request.image_sizes)

    def overflow(self, request: Request) -> str | None:
        """The overflow error for a prompt over ``context_window`` (OpenAI's wording)."""
        if self.context_window is None:
            return None
        prompt = self.prompt_tokens(request)
        reply = int(request.body.get("max_tokens") or 0)
        if prompt + reply <= self.context_window:
            return None
        return (
            f"This model's maximum context length is {self.context_window} tokens. However, you "
            f"requested {prompt + reply} tokens ({prompt} in the messages, {reply} in the "
            "completion). Please reduce the length of the messages or completion."
        )

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
