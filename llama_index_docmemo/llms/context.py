"""Fitting a prompt into the model's context window. Pure: no I/O.

Prompts put every piece of document material (page text, crop text, outline, earlier notes,
candidate descriptions) inside ``<document>`` fences (:func:`fenced`, the one fence for untrusted
text in a prompt). When the
estimated prompt does not fit ``window - reply tokens``, :func:`fit_messages` cuts the fenced
bodies to one common length (the longest are cut first, short ones stay whole), so each page
keeps an equal share; the instructions around them are never cut. When even that cannot make
room, the last images go (each page's text stays, so the page is still read, as text): a small
window is not a reason to fail the query. If the instructions alone do not fit,
:class:`ContextWindowError` says so before anything is sent.

Tokens are estimated from characters (``chars_per_token``, conservative by default); a server's
own "maximum context length" error gives the real count (:func:`parse_overflow`), from which the
caller learns a tighter ratio and fits again.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass

from llama_index.core.base.llms.types import ChatMessage, ImageBlock, TextBlock

from llama_index_docmemo.errors import LLMError

FENCE = re.compile(r"(<document>\n)(.*?)(\n</document>)", re.DOTALL)
"""A fenced piece of document material (:func:`fenced`); group 2 is the body that may be cut."""


def fenced(text: str) -> str:
    """Untrusted ``text`` (document pages, an LLM's own reply) between ``<document>`` tags, with
    any tag inside it defused: prompts tell the model that what stands between the tags is data,
    never instructions, and the text cannot close the fence early and talk outside it."""
    safe = text.replace("<document>", "< document>").replace("</document>", "</ document>")
    return f"<document>\n{safe}\n</document>"


DEFAULT_CHARS_PER_TOKEN = 2.5
"""Conservative: English prose is ~4 characters a token, digit-heavy tables nearer 2."""


class ContextWindowError(LLMError):
    """A prompt that cannot fit the model's context window (or a server said it did not)."""

    def __init__(
        self, message: str, *, window: int | None = None, prompt_tokens: int | None = None
    ):
        super().__init__(message)
        self.window = window
        self.prompt_tokens = prompt_tokens


@dataclass(frozen=True)
class ContextBudget:
    """What one request may hold.

    Args:
        window: tokens the model holds, prompt and reply together.
        reply_tokens: tokens kept free for the reply (the request's ``max_tokens``).
        chars_per_token: characters of text per token, for the estimate.
        tokens_per_image: tokens an image costs (0 for text-only requests).
        tokens_per_message: chat-template overhead per message.
        safety: share of the prompt budget kept free for estimation error.
    """

    window: int
    reply_tokens: int
    chars_per_token: float = DEFAULT_CHARS_PER_TOKEN
    tokens_per_image: int = 0
    tokens_per_message: int = 8
    safety: float = 0.05

    @property
    def prompt_tokens(self) -> int:
        """Tokens the prompt may use."""
        free = self.window - self.reply_tokens
        return max(0, int(free * (1.0 - self.safety)))


def _texts(message: ChatMessage) -> list[str]:
    return [b.text for b in message.blocks if isinstance(b, TextBlock)]


def estimate_tokens(messages: Sequence[ChatMessage], budget: ContextBudget) -> int:
    """Estimated prompt tokens of ``messages`` under ``budget``'s ratios."""
    chars = sum(len(t) for m in messages for t in _texts(m))
    images = sum(isinstance(b, ImageBlock) for m in messages for b in m.blocks)
    return (
        math.ceil(chars / budget.chars_per_token)
        + images * budget.tokens_per_image
        + len(messages) * budget.tokens_per_message
    )


def cut(text: str, limit: int) -> str:
    """``text`` cut to at most ``limit`` characters at a line or word boundary, with a marker."""
    if len(text) <= limit:
        return text
    head = text[: max(0, limit)]
    boundary = max(head.rfind("\n"), head.rfind(" "))
    end = boundary if boundary >= limit // 2 else len(head)
    return head[:end].rstrip() + f"\n[… {len(text) - end} more characters not shown]"


_MARKER_CHARS = len("\n[… 1000000 more characters not shown]")


def common_cap(lengths: Sequence[int], allowed: int) -> int | None:
    """Largest length ``c`` such that cutting every piece to ``c`` (plus a marker on each cut
    piece) totals at most ``allowed`` characters; None when even ``c = 0`` is too long.
    """

    def total(cap: int) -> int:
        return sum(n if n <= cap else cap + _MARKER_CHARS for n in lengths)

    if total(max(lengths, default=0)) <= allowed:
        return max(lengths, default=0)
    if total(0) > allowed:
        return None
    low, high = 0, max(lengths)  # total(low) fits, total(high) does not
    while high - low > 1:
        middle = (low + high) // 2
        if total(middle) <= allowed:
            low = middle
        else:
            high = middle
    return low


def fit_messages(
    messages: Sequence[ChatMessage], budget: ContextBudget, *, where: str = "the model"
) -> list[ChatMessage]:
    """``messages`` whose estimated size fits ``budget``: fenced material cut to a common length,
    and, when that is not enough, the last images left out until it is.

    Raises :class:`ContextWindowError` (naming ``where``) when the text outside the fences and
    the reply do not fit on their own.
    """
    current = list(messages)
    while True:
        fitted = _cut_to_fit(current, budget)
        if fitted is not None:
            return fitted
        if not any(isinstance(b, ImageBlock) for m in current for b in m.blocks):
            break
        current = _without_last_image(current)
    needed = estimate_tokens(messages, budget)
    raise ContextWindowError(
        f"the prompt needs about {estimate_tokens(current, budget)} tokens before any document "
        f"text is cut (without images), more than the {budget.prompt_tokens} that {where} leaves "
        f"for a prompt (context window {budget.window}, {budget.reply_tokens} kept for the "
        f"reply): raise the context window, lower max_tokens or show fewer pages",
        window=budget.window,
        prompt_tokens=needed,
    )


def _cut_to_fit(messages: list[ChatMessage], budget: ContextBudget) -> list[ChatMessage] | None:
    """``messages`` with their fenced bodies cut to one common length so that they fit; None
    when cutting every body to nothing is not enough."""
    needed = estimate_tokens(messages, budget)
    allowed_tokens = budget.prompt_tokens
    if needed <= allowed_tokens:
        return messages
    bodies = [m.group(2) for msg in messages for t in _texts(msg) for m in FENCE.finditer(t)]
    excess_chars = math.ceil((needed - allowed_tokens) * budget.chars_per_token)
    fenced = sum(len(b) for b in bodies)
    cap = common_cap([len(b) for b in bodies], fenced - excess_chars) if bodies else None
    if cap is None:
        return None
    out: list[ChatMessage] = []
    for message in messages:
        blocks = [
            TextBlock(
                text=FENCE.sub(lambda m: m.group(1) + cut(m.group(2), cap) + m.group(3), b.text)
            )
            if isinstance(b, TextBlock)
            else b
            for b in message.blocks
        ]
        out.append(message.model_copy(update={"blocks": blocks}))
    return out


def _without_last_image(messages: list[ChatMessage]) -> list[ChatMessage]:
    """``messages`` less their last image block."""
    for index in range(len(messages) - 1, -1, -1):
        blocks = messages[index].blocks
        last = max((i for i, b in enumerate(blocks) if isinstance(b, ImageBlock)), default=None)
        if last is not None:
            kept = [b for i, b in enumerate(blocks) if i != last]
            return [
                *messages[:index],
                messages[index].model_copy(update={"blocks": kept}),
                *messages[index + 1 :],
            ]
    return messages


_OPENAI_STYLE = re.compile(r"maximum context length is (\d+) tokens", re.IGNORECASE)
_IN_MESSAGES = re.compile(r"(\d+) (?:tokens )?in the messages", re.IGNORECASE)
_REQUESTED = re.compile(r"(?:requested|resulted in) (\d+) tokens", re.IGNORECASE)
_LLAMA_SERVER = re.compile(
    r"\((\d+) tokens\) exceeds the available context size \((\d+) tokens\)", re.IGNORECASE
)


def parse_overflow(message: str, reply_tokens: int) -> tuple[int, int] | None:
    """``(context window, prompt tokens)`` from a server's context-overflow error, else None.

    Understands the OpenAI wording (also used by vLLM and llama-cpp-python: "maximum context
    length is W tokens. However, you requested N tokens (P in the messages, R in the
    completion)") and llama.cpp's server ("request (N tokens) exceeds the available context
    size (W tokens)").
    """
    native = _LLAMA_SERVER.search(message)
    if native:
        return int(native.group(2)), int(native.group(1))
    window = _OPENAI_STYLE.search(message)
    if not window:
        return None
    in_messages = _IN_MESSAGES.search(message)
    if in_messages:
        return int(window.group(1)), int(in_messages.group(1))
    requested = _REQUESTED.search(message)
    if requested:
        total = int(requested.group(1))
        prompt = total - reply_tokens if "completion" in message.lower() else total
        return int(window.group(1)), max(1, prompt)
    return int(window.group(1)), int(window.group(1)) + 1


def learned_ratio(sent_chars: int, prompt_tokens: int, current: float) -> float:
    """A tighter characters-per-token ratio after a server counted ``prompt_tokens``."""
    if prompt_tokens <= 0 or sent_chars <= 0:
        return current
    return min(current, 0.95 * sent_chars / prompt_tokens)
