"""In-memory test doubles of the store, encoder and reasoner contracts (engine unit tests)."""

from __future__ import annotations

import re
import zlib
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
from llama_index_docmemo.memory.schema import DocumentSchema
from llama_index_docmemo.reasoning.base import EvidenceNote, Feedback, Reasoner, ReasoningInput
from llama_index_docmemo.store.base import PageStore
from llama_index_docmemo.store.scope import PageFilter
from llama_index_docmemo.types import (
    PageEmbedding,
    PageHit,
    PageInput,
    PageRecord,
    PageRef,
    QueryEmbedding,
)

WORD = re.compile(r"[a-z0-9]+")
BUCKETS = 100_003


def bucket(word: str) -> int:
    """A word's dimension: a stable hash (the built-in ``hash`` of str is salted per process)."""
    return zlib.crc32(word.encode()) % BUCKETS


class BagOfWordsEncoder(PageEncoder):
    """Hashes words into a small space: one vector per word, so MaxSim counts shared words."""

    name = "bow-test"
    dim = BUCKETS

    def _vec(self, text: str) -> np.ndarray:
        words = WORD.findall(text.lower()) or ["_"]
        m = np.zeros((len(words), self.dim), dtype=np.float32)
        for i, w in enumerate(words):
            m[i, bucket(w)] = 1.0
        return m

    def encode_pages(self, pages: Sequence[PageInput]) -> list[PageEmbedding]:
        return [self._embed(p.text) for p in pages]

    def encode_queries(self, queries: Sequence[str]) -> list[QueryEmbedding]:
        return [self._embed(q) for q in queries]

    def _embed(self, text: str) -> PageEmbedding:
        m = self._vec(text)
        return PageEmbedding(multivector=m, pooled=m.mean(axis=0))


class MemoryPageStore(PageStore):
    """Exact word-overlap search over pages held in a dict (no Qdrant)."""

    def __init__(self, encoder_name: str = "bow-test") -> None:
        self.encoder_name = encoder_name
        self.dim = BUCKETS
        self.schemas: dict[str, DocumentSchema] = {}
        self.pages: dict[PageRef, PageRecord] = {}
        self.searches = 0

    def add(self, doc_id: str, texts: list[str], tenant: str | None = None) -> None:
        schema = DocumentSchema(doc_id=doc_id, doc_version="v1", n_pages=len(texts), tenant=tenant)
        records = [
            PageRecord(doc_id, "v1", i + 1, len(texts), t, source="", tenant=tenant)
            for i, t in enumerate(texts)
        ]
        self.upsert_document(schema, records, [])

    def upsert_document(self, schema, pages, embeddings) -> None:
        self.schemas[schema.doc_id] = schema
        for record in pages:
            self.pages[record.ref] = record

    def document_version(self, doc_id: str, *, tenant: str | None = None) -> str | None:
        schema = self.get_schema(doc_id, tenant=tenant)
        return schema.doc_version if schema else None

    def get_schema(self, doc_id: str, *, tenant: str | None = None) -> DocumentSchema | None:
        schema = self.schemas.get(doc_id)
        return schema if schema is not None and schema.tenant == tenant else None

    def _visible(self, record_or_schema, page_filter: PageFilter | None) -> bool:
        doc_ids = page_filter.doc_ids if page_filter is not None else None
        if doc_ids is not None and record_or_schema.doc_id not in doc_ids:
            return False
        if page_filter is None:
            return True
        if page_filter.tenant != record_or_schema.tenant:
            return False
        acl = set(record_or_schema.acl)
        return not acl or bool(acl & set(page_filter.acl_groups or ()))

    def list_documents(self, page_filter: PageFilter | None = None) -> list[DocumentSchema]:
        return [s for s in self.schemas.values() if self._visible(s, page_filter)]

    def delete_document(self, doc_id: str, *, tenant: str | None = None) -> bool:
        self.pages = {r: p for r, p in self.pages.items() if r.doc_id != doc_id}
        return self.schemas.pop(doc_id, None) is not None

    def search(self, query, *, limit, page_filter=None, prefetch_limit=None) -> list[PageHit]:
        self.searches += 1
        qwords = {int(np.argmax(row)) for row in query.multivector}
        hits = []
        for record in self.pages.values():
            if not self._visible(record, page_filter):
                continue
            pwords = {bucket(w) for w in WORD.findall(record.text.lower())}
            score = len(qwords & pwords)
            if score:
                hits.append(PageHit(record, float(score)))
        hits.sort(key=lambda h: (-h.score, h.record.doc_id, h.record.page))
        return hits[:limit]

    def get_pages(self, refs, page_filter=None) -> list[PageRecord]:
        return [
            self.pages[r]
            for r in refs
            if r in self.pages and self._visible(self.pages[r], page_filter)
        ]

    def count_pages(self, page_filter=None) -> int:
        return sum(self._visible(r, page_filter) for r in self.pages.values())

    def close(self) -> None:
        pass


def one_llm_request() -> None:
    """What a reading costs a real reader: one request to a LlamaIndex LLM (it fires the LLM
    events the loop counts ``llm_calls`` from)."""
    MockLLM(max_tokens=1).complete("read the pages")


class GoldReasoner(Reasoner):
    """Labels shown pages from a gold set; answers once every gold page was read; each reading
    makes one LLM request.

    ``refine`` is the refined query it proposes while evidence is missing.
    """

    name = "gold-test"

    def __init__(self, gold: set[PageRef], refine: str | None = None) -> None:
        self.gold = gold
        self.refine = refine
        self.inputs: list[ReasoningInput] = []

    def reason(self, inp: ReasoningInput) -> Feedback:
        self.inputs.append(inp)
        one_llm_request()
        shown = [p.ref for p in inp.pages]
        useful = [r for r in shown if r in self.gold]
        # per-query knowledge only comes from the input (episodic evidence), so one reasoner
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
