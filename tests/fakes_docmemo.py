"""Test doubles of the encoder, reader and LLM contracts (engine unit tests; the stores are
real: ``stores_docmemo.py``)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import numpy as np
from llama_index.core.base.llms.types import (
    ChatMessage,
    ChatResponse,
    CompletionResponse,
    CompletionResponseGen,
    ImageBlock,
    LLMMetadata,
)
from llama_index.core.bridge.pydantic import Field
from llama_index.core.llms import CustomLLM, MockLLM
from llama_index.core.llms.callbacks import llm_chat_callback, llm_completion_callback

from llama_index_docmemo.encoders.base import PageEncoder
from llama_index_docmemo.readers.base import EvidenceNote, Feedback, Reader, ReaderInput
from llama_index_docmemo.types import (
    PageEmbedding,
    PageInput,
    PageRef,
    QueryEmbedding,
)

WORD = re.compile(r"[a-z0-9]+")
WORDS = 1024
QUERY_TIE = 0.2
_dims: dict[str, int] = {}


def word_dim(word: str) -> int:
    """A word's own dimension (0 is the tie-break's), given on first sight and kept for the
    process, so stores and queries agree and no two words share one (a hash into a space small
    enough for a real store's vectors would make some collide)."""
    dim = _dims.setdefault(word, len(_dims) + 1)
    if dim >= WORDS:
        raise RuntimeError(f"the test encoder knows {WORDS - 1} words; raise WORDS for {word!r}")
    return dim


def page_tie(page: int) -> float:
    """A page's weight on the tie-break dimension, lower for later pages: of two pages sharing
    as many query words, the earlier one scores a little higher. A store orders equal scores as
    it likes (Qdrant Edge differently from one search to the next), so without it the pages
    past the last matching one would come in any order."""
    return 0.05 - 1e-4 * min(page, 400)


class BagOfWordsEncoder(PageEncoder):
    """One one-hot vector per word, so MaxSim (cosine) counts the query words a page has: the
    tie-break moves a score by less than 0.02 a query word."""

    name = "bow-test"
    dim = WORDS

    def _embed(self, text: str, tie: float) -> PageEmbedding:
        words = WORD.findall(text.lower()) or ["_"]
        m = np.zeros((len(words), self.dim), dtype=np.float32)
        m[:, 0] = tie
        for i, w in enumerate(words):
            m[i, word_dim(w)] = 1.0
        return PageEmbedding(multivector=m, pooled=m.mean(axis=0))

    def encode_pages(self, pages: Sequence[PageInput]) -> list[PageEmbedding]:
        return [self._embed(p.text, page_tie(p.ref.page)) for p in pages]

    def encode_queries(self, queries: Sequence[str]) -> list[QueryEmbedding]:
        return [self._embed(q, QUERY_TIE) for q in queries]


def one_llm_request() -> None:
    """What a reading costs a real reader: one request to a LlamaIndex LLM (it fires the LLM
    events the loop counts ``llm_calls`` from)."""
    MockLLM(max_tokens=1).complete("read the pages")


class GoldReader(Reader):
    """Labels shown pages from a gold set; answers once every gold page was read; each reading
    makes one LLM request.

    ``refine`` is the refined query it proposes while evidence is missing.
    """

    name = "gold-test"

    def __init__(self, gold: set[PageRef], refine: str | None = None) -> None:
        self.gold = gold
        self.refine = refine
        self.inputs: list[ReaderInput] = []

    def read(self, inp: ReaderInput) -> Feedback:
        self.inputs.append(inp)
        one_llm_request()
        shown = [p.ref for p in inp.pages]
        useful = [r for r in shown if r in self.gold]
        # per-query knowledge only comes from the input (episodic evidence), so one reader
        # can serve concurrent queries, as a real one must
        done = self.gold <= {n.page for n in inp.evidence} | set(useful)
        return Feedback(
            answer="42" if done else None,
            useful_pages=useful,
            irrelevant_pages=[r for r in shown if r not in self.gold],
            notes=[EvidenceNote(page=r, fact=f"fact on {r}") for r in useful],
            missing=[] if done else ["the rest"],
            refined_query=None if done else self.refine,
            status="answered" if done else "need_more",
        )


class ScriptedLLM(CustomLLM):
    """A real LlamaIndex LLM (so it fires LLM events) answering from a list of replies.

    ``prompts`` records each request's text; once the replies run out, ``default`` answers.
    """

    replies: list[str] = Field(default_factory=list)
    default: str = "{}"
    prompts: list[str] = Field(default_factory=list)

    @property
    def metadata(self) -> LLMMetadata:
        return LLMMetadata(model_name="scripted", is_chat_model=False)

    def _next(self, prompt: str) -> str:
        self.prompts.append(prompt)
        return self.replies.pop(0) if self.replies else self.default

    @llm_completion_callback()
    def complete(
        self, prompt: str, formatted: bool = False, **kwargs: object
    ) -> CompletionResponse:
        return CompletionResponse(text=self._next(prompt))

    @llm_completion_callback()
    def stream_complete(
        self, prompt: str, formatted: bool = False, **kwargs: object
    ) -> CompletionResponseGen:
        text = self._next(prompt)

        def gen() -> CompletionResponseGen:
            for word in text.split(" "):
                yield CompletionResponse(text=word, delta=word + " ")

        return gen()


class ScriptedChatLLM(CustomLLM):
    """A real LlamaIndex chat LLM answering ``chat``/``achat`` from a list of replies, with no
    native structured output (LlamaIndex would put the schema in the prompt), recording each
    request's messages and keyword arguments. ``max_images_per_prompt`` mimics a server cap."""

    replies: list[str] = Field(default_factory=list)
    default: str = "{}"
    calls: list[tuple[list[ChatMessage], dict[str, Any]]] = Field(default_factory=list)
    max_images_per_prompt: int | None = None

    @property
    def metadata(self) -> LLMMetadata:
        return LLMMetadata(model_name="scripted-chat", is_chat_model=True, context_window=32768)

    def _answer(self, messages: Sequence[ChatMessage], kwargs: dict[str, Any]) -> ChatResponse:
        self.calls.append((list(messages), kwargs))
        text = self.replies.pop(0) if self.replies else self.default
        return ChatResponse(message=ChatMessage(role="assistant", content=text))

    @llm_chat_callback()
    def chat(self, messages: Sequence[ChatMessage], **kwargs: Any) -> ChatResponse:
        return self._answer(messages, kwargs)

    @llm_chat_callback()
    async def achat(self, messages: Sequence[ChatMessage], **kwargs: Any) -> ChatResponse:
        return self._answer(messages, kwargs)

    @llm_completion_callback()
    def complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponse:
        raise AssertionError("a chat LLM is asked through chat")

    @llm_completion_callback()
    def stream_complete(
        self, prompt: str, formatted: bool = False, **kwargs: Any
    ) -> CompletionResponseGen:
        raise AssertionError("a chat LLM is asked through chat")

    def images(self, call: int) -> list[ImageBlock]:
        """The image blocks of one request."""
        return [b for m in self.calls[call][0] for b in m.blocks if isinstance(b, ImageBlock)]

    def text(self, call: int) -> str:
        """All text of one request."""
        return "\n".join(m.content or "" for m in self.calls[call][0])


class NativeScriptedLLM(ScriptedChatLLM):
    """Like :class:`ScriptedChatLLM`, with a native structured form of its own (as OpenAI,
    Ollama or Gemini have): ``structured_predict`` sends the messages with ``schema_of`` the
    output class in ``llm_kwargs`` and validates the reply strictly."""

    def structured_predict(self, output_cls, prompt, llm_kwargs=None, **prompt_args):  # noqa: ANN001, ANN201
        messages = prompt.format_messages(**prompt_args)
        response = self.chat(messages, schema_of=output_cls.__name__, **(llm_kwargs or {}))
        return output_cls.model_validate_json(response.message.content or "")

    async def astructured_predict(self, output_cls, prompt, llm_kwargs=None, **prompt_args):  # noqa: ANN001, ANN201
        messages = prompt.format_messages(**prompt_args)
        response = await self.achat(messages, schema_of=output_cls.__name__, **(llm_kwargs or {}))
        return output_cls.model_validate_json(response.message.content or "")
