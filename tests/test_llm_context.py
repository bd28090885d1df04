"""Fitting prompts into a context window, and reading servers' overflow errors (pure)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from llama_index.core.base.llms.types import ChatMessage, TextBlock

from llama_index_docmemo.llms.context import (
    FENCE,
    ContextBudget,
    ContextWindowError,
    common_cap,
    cut,
    estimate_tokens,
    fit_messages,
    learned_ratio,
    parse_overflow,
)
from llama_index_docmemo.llms.exchange import to_messages
from llama_index_docmemo.readers.base import PageView, ReaderInput
from llama_index_docmemo.readers.prompts import READER_SYSTEM, reading_prompt
from llama_index_docmemo.types import PageRef


def fenced(body: str) -> str:
    return f"<document>\n{body}\n</document>"


def messages(*bodies: str, head: str = "Question: q") -> list[ChatMessage]:
    text = head + "".join(f"\n\n[{i + 1}]\n" + fenced(b) for i, b in enumerate(bodies))
    return [
        ChatMessage(role="system", content="Reply in JSON."),
        ChatMessage(role="user", content=text),
    ]


def test_a_prompt_that_fits_is_left_alone() -> None:
    msgs = messages("short page")
    assert fit_messages(msgs, ContextBudget(window=4096, reply_tokens=256)) == msgs


def test_long_pages_are_cut_to_one_common_length_and_short_ones_stay_whole() -> None:
    budget = ContextBudget(window=1024, reply_tokens=256, chars_per_token=2.5)
    msgs = messages("tiny page", "a " * 3000, "b " * 1500)
    out = fit_messages(msgs, budget)
    assert estimate_tokens(out, budget) <= budget.prompt_tokens
    bodies = [m.group(2) for m in FENCE.finditer(out[1].content)]
    assert bodies[0] == "tiny page"
    assert all("more characters not shown]" in b for b in bodies[1:])
    assert abs(len(bodies[1]) - len(bodies[2])) < 60  # an equal share each
    assert out[1].content.startswith("Question: q") and out[0].content == "Reply in JSON."


def test_instructions_alone_too_long_is_a_clear_error() -> None:
    budget = ContextBudget(window=300, reply_tokens=200)
    with pytest.raises(ContextWindowError, match="context window 300, 200 kept for the reply"):
        fit_messages(messages("page", head="Q " * 500), budget, where="http://x/v1")


def test_images_and_messages_count_in_the_estimate() -> None:
    budget = ContextBudget(window=10_000, reply_tokens=0, chars_per_token=2.0, tokens_per_image=700)
    from llama_index.core.base.llms.types import ImageBlock

    msg = ChatMessage(role="user", blocks=[TextBlock(text="x" * 100), ImageBlock(image=b"png")])
    assert estimate_tokens([msg], budget) == 50 + 700 + budget.tokens_per_message


def test_images_that_cannot_fit_are_left_out_last_first_and_text_is_kept() -> None:
    """A 4k window cannot hold two 2,048-token images: the last goes, then the first, and each
    page's text is still sent (the query reads it as text instead of failing)."""
    from llama_index.core.base.llms.types import ImageBlock

    page = "<document>\n" + "page words " * 200 + "\n</document>"
    msg = ChatMessage(
        role="user",
        blocks=[
            TextBlock(text="Question: q"),
            ImageBlock(image=b"p1"),
            TextBlock(text=page),
            ImageBlock(image=b"p2"),
            TextBlock(text=page),
        ],
    )
    one = ContextBudget(window=4096, reply_tokens=256, tokens_per_image=2048)
    out = fit_messages([msg], one)
    assert [b for b in out[0].blocks if isinstance(b, ImageBlock)] == [msg.blocks[1]]  # p1
    assert estimate_tokens(out, one) <= one.prompt_tokens
    none = ContextBudget(window=2048, reply_tokens=256, tokens_per_image=2048)
    out = fit_messages([msg], none)
    assert not [b for b in out[0].blocks if isinstance(b, ImageBlock)]
    assert sum(t.count("page words") for t in (b.text for b in out[0].blocks)) > 0


def test_the_reader_prompt_fences_every_page_text() -> None:
    pages = [PageView(ref=PageRef("d.pdf", n), text=f"text of page {n} " * 300) for n in (1, 2, 3)]
    inp = ReaderInput(question="q?", query="q", pages=pages)
    msgs = to_messages(READER_SYSTEM, reading_prompt(inp, set(), set(), page_chars=6000), {})
    budget = ContextBudget(window=2048, reply_tokens=256)
    out = fit_messages(msgs, budget)
    assert estimate_tokens(out, budget) <= budget.prompt_tokens
    text = out[1].content
    assert all(f"[{i}] d.pdf, page {i}" in text for i in (1, 2, 3))
    assert text.count("more characters not shown]") == 3 and "Reply with a JSON object" in text


@given(
    st.lists(st.integers(min_value=0, max_value=5000), min_size=1, max_size=12),
    st.integers(min_value=0, max_value=60000),
)
def test_common_cap_is_the_largest_that_fits(lengths: list[int], allowed: int) -> None:
    cap = common_cap(lengths, allowed)
    marker = len("\n[… 1000000 more characters not shown]")

    def total(c: int) -> int:
        return sum(n if n <= c else c + marker for n in lengths)

    if cap is None:
        assert total(0) > allowed
    else:
        assert total(cap) <= allowed
        assert cap == max(lengths) or total(cap + 1) > allowed


@given(st.text(min_size=0, max_size=3000), st.integers(min_value=0, max_value=3000))
def test_cut_never_exceeds_the_limit_plus_marker(text: str, limit: int) -> None:
    out = cut(text, limit)
    assert (
        out == text
        if len(text) <= limit
        else len(out) <= limit + len(f"\n[… {len(text)} more characters not shown]")
    )


@pytest.mark.parametrize(
    ("message", "expected"),
    [
        (
            "This model's maximum context length is 2048 tokens. However, you requested 2600 "
            "tokens (2344 in the messages, 256 in the completion). Please reduce the length.",
            (2048, 2344),
        ),
        (
            "This model's maximum context length is 32768 tokens. However, you requested 40000 "
            "tokens in the messages, Please reduce the length of the messages.",
            (32768, 40000),
        ),
        (
            "This model's maximum context length is 128000 tokens. However, your messages "
            "resulted in 130001 tokens. Please reduce the length of the messages.",
            (128000, 130001),
        ),
        (
            "the request (5000 tokens) exceeds the available context size (4096 tokens), try increasing it",
            (4096, 5000),
        ),
        ("CUDA out of memory", None),
    ],
)
def test_overflow_errors_of_each_server(message: str, expected) -> None:
    assert parse_overflow(message, reply_tokens=256) == expected


def test_a_learned_ratio_only_ever_tightens() -> None:
    assert learned_ratio(4000, 2000, 2.5) == pytest.approx(1.9)
    assert learned_ratio(4000, 1000, 2.5) == 2.5
    assert learned_ratio(0, 0, 2.5) == 2.5
