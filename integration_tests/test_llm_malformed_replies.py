"""Whatever a server sends, a request ends as a reply or as the package's LLMError naming the URL,
the model and what was wrong: never an IndexError, AttributeError or JSONDecodeError from inside a
client. Generated malformed replies (empty choices, fields of the wrong type, HTML, truncated
JSON, huge bodies, broken server-sent events) go through the real ``openai`` client to a local
server, on the sync, async and streaming paths."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterator

import pytest
from fake_vllm_server import FakeVLLM, Reply, _completion
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from llama_index.core.base.llms.types import ChatMessage

from llama_index_docmemo.errors import LLMError, MalformedReplyError
from llama_index_docmemo.llms import OpenAICompatible

MODEL = "served-model"
MESSAGES = [ChatMessage(role="user", content="What was revenue in 2023?")]

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3)
    ),
    max_leaves=8,
)
not_text = json_values.filter(lambda v: not isinstance(v, str) and v is not None)
not_a_list = json_values.filter(lambda v: not isinstance(v, list))
not_an_object = json_values.filter(lambda v: not isinstance(v, dict))


def completion_with(**changes: object) -> dict:
    body = _completion(MODEL, "Revenue was $5.2M.", 10)
    choice = body["choices"][0]
    if "choices" in changes:
        body["choices"] = changes["choices"]
    if "choice" in changes:
        body["choices"] = [changes["choice"]]
    if "message" in changes:
        choice["message"] = changes["message"]
    if "content" in changes:
        choice["message"]["content"] = changes["content"]
    return body


def as_json(body: object) -> bytes:
    return json.dumps(body).encode()


whole_completion = as_json(_completion(MODEL, "Revenue was $5.2M.", 10))
wrong_shapes = st.one_of(
    st.just(completion_with(choices=[])),
    not_a_list.map(lambda v: completion_with(choices=v)),
    not_an_object.map(lambda v: completion_with(choice=v)),
    not_an_object.filter(lambda v: v is not None).map(lambda v: completion_with(message=v)),
    st.just(completion_with(message=None)),
    not_text.map(lambda v: completion_with(content=v)),
    json_values.filter(lambda v: not isinstance(v, dict) or "choices" not in v),
).map(lambda body: Reply(body=as_json(body)))
html = st.text(max_size=300).map(
    lambda t: f"<html><head><title>502 Bad Gateway</title></head><body>{t}</body></html>"
)
html_replies = st.tuples(html, st.sampled_from(["text/html", "application/json", "text/plain"]))
truncated = st.integers(0, len(whole_completion) - 1).map(lambda n: whole_completion[:n])
huge = st.sampled_from([1_000_000, 10_000_000]).map(lambda n: b"<html>" + b"x" * n)
malformed_replies = st.one_of(
    wrong_shapes,
    html_replies.map(lambda p: Reply(body=p[0].encode(), content_type=p[1])),
    truncated.map(lambda b: Reply(body=b)),
    huge.map(lambda b: Reply(body=b, content_type="text/html")),
    huge.map(lambda b: Reply(body=b)),
)


def sse(*data: str) -> bytes:
    return "".join(f"data: {d}\n\n" for d in data).encode()


chunk = {"id": "c", "object": "chat.completion.chunk", "created": 1, "model": MODEL}
broken_chunks = st.one_of(
    not_a_list.map(lambda v: json.dumps({**chunk, "choices": v})),
    not_an_object.filter(lambda v: v is not None).map(
        lambda v: json.dumps({**chunk, "choices": [{"index": 0, "delta": v}]})
    ),
    not_text.map(
        lambda v: json.dumps({**chunk, "choices": [{"index": 0, "delta": {"content": v}}]})
    ),
    st.text(max_size=50).map(lambda t: "{not json " + t),
)
stream_replies = st.one_of(
    malformed_replies,
    st.lists(broken_chunks, min_size=1, max_size=3).map(
        lambda items: Reply(body=sse(*items, "[DONE]"), content_type="text/event-stream")
    ),
    st.just(Reply(body=b"", content_type="text/event-stream")),
)


@pytest.fixture(scope="module")
def server() -> Iterator[FakeVLLM]:
    with FakeVLLM([], model=MODEL, require_schema=False) as fake:
        yield fake


def client(server: FakeVLLM) -> OpenAICompatible:
    return OpenAICompatible(
        model=MODEL, api_base=server.url, max_retries=0, timeout=20, multimodal=False
    )


def assert_names_the_server(error: LLMError, server: FakeVLLM) -> None:
    text = str(error)
    assert server.url in text and MODEL in text and "\n" not in text
    assert len(text) < 1200  # an excerpt of the body, never all of it


examples = settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


@examples
@given(reply=malformed_replies)
def test_sync_chat_turns_any_malformed_reply_into_an_llm_error(
    server: FakeVLLM, reply: Reply
) -> None:
    server.default = reply
    with pytest.raises(MalformedReplyError) as err:
        client(server).chat(MESSAGES)
    assert_names_the_server(err.value, server)


@examples
@given(reply=malformed_replies)
def test_async_chat_turns_any_malformed_reply_into_an_llm_error(
    server: FakeVLLM, reply: Reply
) -> None:
    server.default = reply

    async def ask() -> None:
        await client(server).achat(MESSAGES)

    with pytest.raises(MalformedReplyError) as err:
        asyncio.run(ask())
    assert_names_the_server(err.value, server)


@examples
@given(reply=stream_replies)
def test_streams_end_as_text_or_an_llm_error(server: FakeVLLM, reply: Reply) -> None:
    """A stream of broken chunks ends as the LLM error; one whose chunks happen to carry no
    text (choices all empty) is an empty answer, never a raw exception."""
    server.default = reply
    try:
        text = "".join(r.delta or "" for r in client(server).stream_chat(MESSAGES))
    except LLMError as error:
        assert_names_the_server(error, server)
    else:
        assert isinstance(text, str)

    async def collect() -> str:
        stream = await client(server).astream_chat(MESSAGES)
        return "".join([r.delta or "" async for r in stream])

    try:
        text = asyncio.run(collect())
    except LLMError as error:
        assert_names_the_server(error, server)
    else:
        assert isinstance(text, str)


@pytest.mark.parametrize(
    ("reply", "said"),
    [
        (Reply(body=as_json(completion_with(choices=[]))), "empty 'choices' list"),
        (Reply(body=b"<html>Bad Gateway</html>", content_type="text/html"), "not JSON"),
        (Reply(body=b"x" * 10_000_000), "not JSON"),
        (Reply(body=whole_completion[:40]), "not JSON"),
        (Reply(body=b"", content_type="text/event-stream"), "stream without a single chunk"),
    ],
)
def test_the_error_says_what_was_wrong(server: FakeVLLM, reply: Reply, said: str) -> None:
    server.default = reply
    llm = client(server)
    with pytest.raises(MalformedReplyError, match=said):
        if reply.content_type == "text/event-stream":
            list(llm.stream_chat(MESSAGES))
        else:
            llm.chat(MESSAGES)


def test_a_well_formed_reply_still_reads(server: FakeVLLM) -> None:
    server.default = Reply("Revenue was $5.2M.")
    response = client(server).chat(MESSAGES)
    assert response.message.content == "Revenue was $5.2M."
    assert response.additional_kwargs["prompt_tokens"] > 0
    streamed = "".join(r.delta or "" for r in client(server).stream_chat(MESSAGES))
    assert streamed == "Revenue was $5.2M."


@pytest.mark.parametrize("header", [{"Retry-After": "30"}, {"retry-after-ms": "30000"}])
def test_a_429_asking_for_a_wait_past_the_deadline_is_reported_as_such(
    server: FakeVLLM, header: dict[str, str]
) -> None:
    """Not "did not answer within the deadline" after sleeping until it: the server answered,
    and the error says what it answered, at once."""
    server.default = Reply(status=429, headers=header, error="rate limit: 3 requests a minute")
    llm = OpenAICompatible(model=MODEL, api_base=server.url, max_retries=2, request_deadline=4)
    started = time.perf_counter()
    with pytest.raises(LLMError) as err:
        llm.chat(MESSAGES)
    assert time.perf_counter() - started < 2
    assert "HTTP 429" in str(err.value) and "3 requests a minute" in str(err.value)
    assert_names_the_server(err.value, server)
