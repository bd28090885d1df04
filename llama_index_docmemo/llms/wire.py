"""A chat request's JSON body built in a worker thread, so the event loop only sends bytes.

``AsyncCompletions.create`` walks its arguments against the request's typed schema and encodes
them to JSON on the event loop: for a request carrying page images in base64 (megabytes) that
is 10-15 ms of CPU each, and 32 concurrent queries send their requests together, so the loop
ran hundreds of milliseconds of them back to back (``benchmarks/query_stall.py``). The body is
encoded here instead, in a blocking call, byte for byte as ``create`` sends it (its body fields
in its order, ``extra_body`` merged over them, JSON as the SDK writes it), and posted through the
client's public ``post`` with ``content=``: the client's retries, timeouts, authentication and
error types stay the SDK's own.
"""

from __future__ import annotations

import inspect
import json
from dataclasses import dataclass
from functools import cache
from typing import Any

import openai
from openai.types.chat import ChatCompletion, ChatCompletionChunk
from pydantic import BaseModel

# ``create``'s arguments that are request options, not body fields
_OPTIONS = {"extra_headers": "headers", "extra_query": "params", "timeout": "timeout"}


@cache
def _field_order() -> dict[str, int]:
    """``create``'s parameters in the order it writes them into the body."""
    names = inspect.signature(openai.resources.chat.AsyncCompletions.create).parameters
    return {name: n for n, name in enumerate(names)}


@dataclass(frozen=True)
class WireRequest:
    """A chat completion request ready to send: the encoded body and the request options."""

    body: bytes
    options: dict[str, Any]
    stream: bool


def _plain(value: Any) -> Any:
    """JSON for what ``json`` cannot write itself: a pydantic model as the SDK dumps it."""
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json", exclude_unset=True, by_alias=True)
    raise TypeError(f"{type(value).__name__} is not JSON serialisable in a chat request")


def wire_request(request: dict[str, Any]) -> WireRequest:
    """``request`` (``chat.completions.create``'s keyword arguments) as a :class:`WireRequest`
    (blocking: encodes the whole body, images included)."""
    order = _field_order()
    given = [k for k in request if k not in _OPTIONS and k != "extra_body"]
    fields = {k: request[k] for k in sorted(given, key=lambda k: order.get(k, len(order)))}
    fields.update(request.get("extra_body") or {})
    options = {_OPTIONS[k]: request[k] for k in _OPTIONS if request.get(k) is not None}
    body = json.dumps(
        fields, default=_plain, ensure_ascii=False, separators=(",", ":"), allow_nan=False
    ).encode()
    return WireRequest(body=body, options=options, stream=bool(fields.get("stream")))


async def send(client: openai.AsyncOpenAI, wire: WireRequest) -> Any:
    """The reply to ``wire`` from ``client``: a ``ChatCompletion``, or an ``AsyncStream`` of
    chunks when it streams."""
    return await client.post(
        "/chat/completions",
        cast_to=ChatCompletion,
        content=wire.body,
        options=wire.options,  # type: ignore[arg-type]
        stream=wire.stream,
        stream_cls=openai.AsyncStream[ChatCompletionChunk],
    )
