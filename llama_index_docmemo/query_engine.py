"""DocMemoQueryEngine: the DocMemo loop as a LlamaIndex query engine (a thin adapter).

A drop-in for ``RetrieverQueryEngine``: ``query``/``aquery`` return a ``Response`` whose
``source_nodes`` are the evidence pages and whose ``metadata["docmemo"]`` is the round-by-round
trace; ``retrieve``/``synthesize`` let it sit under routers and tools. Like LlamaIndex's
``RetrieverQueryEngine`` it is composed of named parts, held by one
:class:`~llama_index_docmemo.loop.DocMemoRunner` (store, encoder, config, reader, reranker,
crops, executors): :meth:`DocMemoQueryEngine.from_defaults` builds it, the retriever is a view
of its round 1, and the loop (:mod:`llama_index_docmemo.loop`) runs every query over it. This
module wires LlamaIndex conventions around it: ``Settings``, prompts
(``get_prompts``/``update_prompts``), streaming, callbacks.
"""

from __future__ import annotations

import contextlib
import logging
import time
import warnings
from collections.abc import AsyncGenerator, Generator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import llama_index.core.instrumentation as instrument
from llama_index.core.base.base_query_engine import BaseQueryEngine
from llama_index.core.base.response.schema import (
    RESPONSE_TYPE,
    AsyncStreamingResponse,
    Response,
    StreamingResponse,
)
from llama_index.core.callbacks import CallbackManager
from llama_index.core.prompts import BasePromptTemplate
from llama_index.core.prompts.mixin import PromptDictType, PromptMixin, PromptMixinType
from llama_index.core.response_synthesizers.type import ResponseMode
from llama_index.core.schema import NodeWithScore, QueryBundle
from llama_index.core.settings import Settings
from pydantic import ValidationError

from llama_index_docmemo.config import DocMemoConfig
from llama_index_docmemo.errors import DeadlineExceeded
from llama_index_docmemo.events import counting_llm_calls
from llama_index_docmemo.llms.servers import ServerMemory, memory_for
from llama_index_docmemo.llms.vision import ImagesSetting
from llama_index_docmemo.llms.wire import (
    aiterate_with_deadline,
    await_with_deadline,
    deadline_scope,
    is_llm_failure,
    iterate_with_deadline,
    remaining,
)
from llama_index_docmemo.loop import (
    DocMemoResult,
    DocMemoRunner,
    arun_query,
    clean_question,
    crop_view,
    run_query,
)
from llama_index_docmemo.nodes import is_page, node_ref
from llama_index_docmemo.paths import default_cache_dir
from llama_index_docmemo.readers.base import PageView, Reader, ReaderInput, sanitize_feedback
from llama_index_docmemo.readers.prompts import ANSWER_PROMPT, evidence_text
from llama_index_docmemo.retriever import DocMemoRetriever, ScopeLike
from llama_index_docmemo.types import Feedback

if TYPE_CHECKING:
    from concurrent.futures import Executor

    from llama_index.core.llms import LLM
    from llama_index.core.postprocessor.types import BaseNodePostprocessor

    from llama_index_docmemo.encoders.base import PageEncoder
    from llama_index_docmemo.store.base import PageStore

__all__ = ["DocMemoQueryEngine", "DocMemoResult", "configured_llm"]

dispatcher = instrument.get_dispatcher(__name__)
logger = logging.getLogger(__name__)


def configured_llm() -> LLM | None:
    """The app's ``Settings.llm``, or None when there is none: nothing set and no OpenAI key
    for LlamaIndex's default, or an explicit ``MockLLM`` (what ``Settings.llm = None`` installs)."""
    from llama_index.core.llms import MockLLM

    try:
        llm = Settings.llm
    except (ValueError, ImportError):  # LlamaIndex's default OpenAI model has no key here
        return None
    return None if type(llm) is MockLLM else llm


ENGINE_ARGUMENTS = frozenset(
    {"evidence_images", "cache_dir", "answer_prompt"}  # DocMemoQueryEngine's own
)
_LLAMAINDEX_HINTS = {
    "text_qa_template": "the reader's prompts are 'reader:system' / 'reader:reply' "
    "(engine.update_prompts), the streamed answer's is answer_prompt=",
    "refine_template": "there is no refine step: the reader writes the answer",
    "summary_template": "there is no summary step: the reader writes the answer",
    "doc_ids": "scope documents with filters=MetadataFilters([MetadataFilter(key='doc_id', "
    "value=[...], operator='in')])",
    "embed_model": "pages are searched with the store's own encoder (encoder=)",
    "vector_store_query_mode": "the store always fuses its dense and BM25 branches",
    "sparse_top_k": "the store fuses config.selection.candidates candidates",
    "output_cls": "DocMemo answers in text; use the LLM's structured_predict on response.response",
}


def check_engine_arguments(kwargs: dict[str, Any]) -> None:
    """Refuse, by name, arguments of LlamaIndex's engines that DocMemo has no use for (a
    silent ignore would look like a setting that took effect)."""
    unknown = sorted(set(kwargs) - ENGINE_ARGUMENTS)
    if not unknown:
        return
    details = "; ".join(
        f"{name!r}: {_LLAMAINDEX_HINTS[name]}" if name in _LLAMAINDEX_HINTS else repr(name)
        for name in unknown
    )
    raise TypeError(
        f"DocMemoQueryEngine does not take {details} (it takes llm, reader, config, filters, "
        "similarity_top_k, node_postprocessors, reranker, response_mode='compact', streaming, "
        f"images, callback_manager, server_memory, {', '.join(sorted(ENGINE_ARGUMENTS))})"
    )


def renamed_reader(reader: Reader | None, kwargs: dict[str, Any]) -> Reader | None:
    """``reader``, or the reader passed under its 0.2 name ``reasoner=`` (popped from ``kwargs``,
    with a DeprecationWarning; the name goes in 0.4.0); both at once are a TypeError."""
    if "reasoner" not in kwargs:
        return reader
    old = kwargs.pop("reasoner")
    if reader is not None:
        raise TypeError("give reader= or its deprecated 0.2 name reasoner=, not both")
    warnings.warn(
        "reasoner= is deprecated: pass reader= (the 0.2 name goes in 0.4.0)",
        DeprecationWarning,
        stacklevel=3,
    )
    return old


def _with_top_k(config: DocMemoConfig, similarity_top_k: int | None) -> DocMemoConfig:
    """``config`` reading ``similarity_top_k`` pages a round, or a ValueError naming it."""
    if similarity_top_k is None:
        return config
    try:
        return config.updated(pages_per_round=similarity_top_k)
    except ValidationError as exc:
        raise ValueError(
            f"similarity_top_k={similarity_top_k!r}: the DocMemo engine reads that many pages a "
            f"round (pages_per_round: {exc.errors()[0]['msg']}); for more pages at once use "
            "index.as_retriever(similarity_top_k=...)"
        ) from None


NO_LLM_WARNING = (
    "DocMemo has no LLM: reading with the offline reader, which labels pages from their text "
    "and rarely gives an exact answer. Set Settings.llm (any LlamaIndex LLM, e.g. "
    "OpenAI(model='gpt-4o')) or pass llm=... to read pages with a model."
)


class DocMemoQueryEngine(BaseQueryEngine):
    """Answers a question by up to T rounds of select -> read -> update, stopping early.

    Args:
        retriever: the runner's round 1 (store, encoder, config, reranker, executors) and the
            caller's scope; the engine's runner is the same with the reader and crops.
        reader: reads the pages and labels them (VLM/LLM reader, offline, or simulated).
        crop_postprocessor: adds table/figure crops of the pages read (adaptive granularity).
        llm: writes the streamed final answer when ``streaming`` is on (without one, the
            loop's answer is streamed as one chunk).
        evidence_images: attach the rendered page image to each evidence node.
        cache_dir: where rendered evidence pages are cached.
        answer_prompt: the final-answer prompt (``{question}``, ``{draft}``, ``{evidence}``).
    """

    def __init__(
        self,
        retriever: DocMemoRetriever,
        reader: Reader | None = None,
        crop_postprocessor: BaseNodePostprocessor | None = None,
        llm: LLM | None = None,
        streaming: bool = False,
        evidence_images: bool = True,
        cache_dir: str | Path | None = None,
        callback_manager: CallbackManager | None = None,
        answer_prompt: BasePromptTemplate | None = None,
        **renamed: Any,
    ) -> None:
        reader = renamed_reader(reader, renamed)
        if renamed or reader is None:
            raise TypeError(
                f"DocMemoQueryEngine() takes a reader, not {', '.join(renamed) or 'None'} "
                "(build one with DocMemoQueryEngine.from_defaults)"
            )
        super().__init__(callback_manager=callback_manager or retriever.callback_manager)
        self.retriever = retriever
        self.llm = llm
        self.streaming = streaming
        self.answer_prompt: BasePromptTemplate = answer_prompt or ANSWER_PROMPT
        self.runner: DocMemoRunner = retriever.runner.with_parts(
            reader=reader,
            crops=crop_postprocessor,
            callback_manager=self.callback_manager,
            evidence_images=evidence_images,
            cache_dir=Path(cache_dir) if cache_dir else default_cache_dir(),
            reserved_llm_calls=1 if streaming else 0,
            round_events=True,
        )

    # -- the runner's parts, by the names the engine takes -------------------------------------
    @property
    def config(self) -> DocMemoConfig:
        return self.runner.config

    @property
    def reader(self) -> Reader:
        assert self.runner.reader is not None
        return self.runner.reader

    @property
    def reasoner(self) -> Reader:
        """Deprecated: :attr:`reader` (its 0.2 name; it goes in 0.4.0)."""
        warnings.warn(
            "DocMemoQueryEngine.reasoner is deprecated: use .reader (the 0.2 name goes in 0.4.0)",
            DeprecationWarning,
            stacklevel=2,
        )
        return self.reader

    @property
    def crop_postprocessor(self) -> BaseNodePostprocessor | None:
        return self.runner.crops

    @property
    def evidence_images(self) -> bool:
        return self.runner.evidence_images

    @property
    def cache_dir(self) -> Path:
        assert self.runner.cache_dir is not None
        return self.runner.cache_dir

    @classmethod
    def from_defaults(
        cls,
        store: PageStore,
        encoder: PageEncoder | None = None,
        llm: LLM | None = None,
        reader: Reader | None = None,
        config: DocMemoConfig | None = None,
        page_filter: ScopeLike = None,
        crop_postprocessor: BaseNodePostprocessor | None = None,
        reranker: BaseNodePostprocessor | None = None,
        streaming: bool = False,
        callback_manager: CallbackManager | None = None,
        images: ImagesSetting = "auto",
        similarity_top_k: int | None = None,
        node_postprocessors: Sequence[BaseNodePostprocessor] | None = None,
        response_mode: ResponseMode | str = ResponseMode.COMPACT,
        cpu_executor: Executor | None = None,
        server_memory: ServerMemory | None = None,
        **kwargs: Any,
    ) -> DocMemoQueryEngine:
        """Wire an engine the LlamaIndex way.

        The reader is ``reader`` if given, else an LLM reader over ``llm`` or, failing that,
        ``Settings.llm``; only with no LLM anywhere the offline reader, with a warning saying
        how to set one (and ``"reader": "offline"`` in the trace). ``images`` (True, False,
        "auto") says whether the LLM is shown page images: "auto" takes the LLM's own flag, else
        its model family (gpt-4o, Claude 3+, Gemini, Ollama vision models...), else text; the
        choice is logged once and recorded in the trace. Callbacks default to
        ``Settings.callback_manager``. ``page_filter`` takes a ``PageFilter`` or LlamaIndex
        ``MetadataFilters``. With an LLM and ``adaptive_granularity``, table/figure crops are
        added; with ``llm_rerank``, the schema-summary LLM reranker. ``cpu_executor``: where
        async queries run GIL-holding work (default: the process's CPU thread; see
        :mod:`llama_index_docmemo.step_runtime`). The reader and reranker built here share one
        ``server_memory`` (what the server taught: a refusal of images, its window): the LLM's
        own for an :class:`~llama_index_docmemo.OpenAICompatible`, else the one given (pass one to
        several engines to share it), else the engine's own.

        LlamaIndex's names: ``similarity_top_k`` is the pages read per round
        (``pages_per_round``), ``node_postprocessors`` run in order as the rerank stage of each
        round (instead of ``reranker``), ``response_mode`` may only be "compact" (the reader
        writes the answer: there is no synthesizer over chunks to choose); any other argument
        is refused by name (:func:`check_engine_arguments`).
        """
        reader = renamed_reader(reader, kwargs)
        check_engine_arguments(kwargs)
        if str(getattr(response_mode, "value", response_mode)) != ResponseMode.COMPACT.value:
            raise ValueError(
                f"response_mode={response_mode!r}: DocMemo's reader writes the answer from the "
                "pages each round reads, so there is no synthesizer over chunks to choose; use "
                "the default ('compact'), or streaming=True for a final answer written by the "
                "LLM from the evidence"
            )
        config = _with_top_k(config or DocMemoConfig(), similarity_top_k)
        if node_postprocessors:
            if reranker is not None:
                raise ValueError("give reranker= or node_postprocessors=, not both")
            from llama_index_docmemo.postprocessors.chain import PostprocessorChain

            reranker = (
                node_postprocessors[0]
                if len(node_postprocessors) == 1
                else PostprocessorChain(postprocessors=list(node_postprocessors))
            )
        if encoder is None:
            from llama_index_docmemo.encoders import default_encoder

            encoder = default_encoder()
        if llm is None and reader is None:
            llm = configured_llm()
        if llm is not None:
            server_memory = memory_for(llm, server_memory)
        if reader is None:
            if llm is not None:
                from llama_index_docmemo.readers.vlm import VLMReader

                reader = VLMReader(
                    llm,
                    images=images,
                    server_memory=server_memory,
                    max_image_tokens=config.budget.max_image_tokens,
                    max_image_bytes=config.budget.max_image_bytes,
                )
                logger.info("DocMemo reader: %s", reader.image_choice.reason)
            else:
                from llama_index_docmemo.readers.offline import OfflineReader

                logger.warning(NO_LLM_WARNING)
                reader = OfflineReader()
        cache_dir = str(kwargs.get("cache_dir") or default_cache_dir())  # crops, images too
        if crop_postprocessor is None and llm is not None and config.loop.adaptive_granularity:
            from llama_index_docmemo.postprocessors.crops import CropPostprocessor

            crop_postprocessor = CropPostprocessor(cache_dir=cache_dir)
        if reranker is None and llm is not None and config.selection.llm_rerank:
            from llama_index_docmemo.postprocessors.rerank import LLMReranker

            reranker = LLMReranker(
                llm=llm,
                top_n=config.loop.pages_per_round,
                images=images,
                server_memory=server_memory,
                max_image_tokens=config.budget.max_image_tokens,
                max_image_bytes=config.budget.max_image_bytes,
                cache_dir=cache_dir,
            )
        callbacks = callback_manager or Settings.callback_manager
        runner = DocMemoRunner.build(
            store, encoder, config, reranker=reranker, callback_manager=callbacks, cpu=cpu_executor
        )
        retriever = DocMemoRetriever.over(runner, page_filter)
        return cls(
            retriever,
            reader,
            crop_postprocessor=crop_postprocessor,
            llm=llm,
            streaming=streaming,
            callback_manager=callbacks,
            **kwargs,
        )

    # -- prompts ------------------------------------------------------------------------------
    def _get_prompts(self) -> PromptDictType:
        return {"answer": self.answer_prompt}

    def _update_prompts(self, prompts_dict: PromptDictType) -> None:
        if "answer" in prompts_dict:
            self.answer_prompt = prompts_dict["answer"]

    def _get_prompt_modules(self) -> PromptMixinType:
        modules: PromptMixinType = {}
        if isinstance(self.reader, PromptMixin):
            modules["reader"] = self.reader
        if isinstance(self.runner.reranker, PromptMixin):
            modules["reranker"] = self.runner.reranker
        return modules

    # -- the loop -----------------------------------------------------------------------------
    def run(self, question: str, page_filter: ScopeLike = None) -> DocMemoResult:
        """Run the loop for one question (synchronously) over the engine's runner, in a fresh
        state (never shared); ``page_filter`` narrows the engine's scope (it never widens it:
        see :meth:`~llama_index_docmemo.store.scope.PageFilter.narrow`)."""
        return run_query(self.runner, question, self.retriever.page_filter.narrow(page_filter))

    async def arun(self, question: str, page_filter: ScopeLike = None) -> DocMemoResult:
        """Async :meth:`run`: store search, reranker, crops and reader are awaited."""
        scope = self.retriever.page_filter.narrow(page_filter)
        return await arun_query(self.runner, question, scope)

    # -- BaseQueryEngine hooks ----------------------------------------------------------------
    @dispatcher.span
    def _query(self, query_bundle: QueryBundle) -> RESPONSE_TYPE:
        result = self.run(query_bundle.query_str)
        if not self.streaming:
            return result.to_response()
        response = result.to_response()
        return StreamingResponse(
            response_gen=self._stream_answer(result, response.metadata or {}, self._ends(result)),
            source_nodes=response.source_nodes,
            metadata=response.metadata,
        )

    @dispatcher.span
    async def _aquery(self, query_bundle: QueryBundle) -> RESPONSE_TYPE:
        result = await self.arun(query_bundle.query_str)
        if not self.streaming:
            return result.to_response()
        response = result.to_response()
        return AsyncStreamingResponse(
            response_gen=self._astream_answer(result, response.metadata or {}, self._ends(result)),
            source_nodes=response.source_nodes,
            metadata=response.metadata,
        )

    async def astream(self, question: str) -> AsyncStreamingResponse:
        """Run the loop, then stream the final answer (needs ``streaming=True``)."""
        if not self.streaming:
            raise ValueError("astream needs an engine built with streaming=True")
        response = await self.aquery(question)
        assert isinstance(response, AsyncStreamingResponse)
        return response

    def _answer_request(self, result: DocMemoResult, at: float | None) -> str | None:
        """The final-answer prompt, or None when the budget has no call or time left for it."""
        cap = self.config.budget.max_llm_calls
        if cap is not None and result.trace.llm_calls >= cap:
            return None
        if at is not None and time.monotonic() >= at:
            return None
        evidence = evidence_text([n for n in result.source_nodes if is_page(n)])
        return self.answer_prompt.format(
            question=result.trace.question, draft=result.answer, evidence=evidence
        )

    def _ends(self, result: DocMemoResult) -> float | None:
        """The ``time.monotonic()`` instant the streamed answer must end by: what is left of the
        query's ``max_seconds`` after the loop (None: no limit)."""
        limit = self.config.budget.max_seconds
        return None if limit is None else time.monotonic() + max(limit - result.trace.seconds, 0)

    @staticmethod
    def _settle(
        result: DocMemoResult, metadata: dict[str, Any], text: str, calls: int, error: str | None
    ) -> None:
        """The streamed text becomes the answer of the result and of the trace (with why the
        stream ended early, if it did)."""
        result.answer = text
        result.trace.answer = text
        result.trace.llm_calls += calls
        result.trace.error = result.trace.error or error
        metadata["docmemo"] = result.trace.model_dump(mode="json")

    def _cut(self, error: Exception, at: float | None) -> str:
        """Why the streamed answer ended early: the query's deadline, or the LLM's failure
        (anything else is a fault of the code, raised)."""
        if at is not None and (isinstance(error, DeadlineExceeded) or time.monotonic() >= at):
            limit = self.config.budget.max_seconds
            return f"the streamed answer was cut at the query's deadline (max_seconds={limit:g})"
        if not is_llm_failure(error):
            raise error
        return f"the streamed answer ended early: {error}"

    def _stream_answer(
        self, result: DocMemoResult, metadata: dict[str, Any], at: float | None
    ) -> Generator[str, None, None]:
        """Stream a final answer written by the LLM from the evidence the loop found (one call,
        counted in ``max_llm_calls``), ended by the query's deadline; with no call or time
        left, the loop's answer. A stream cut short keeps its text (the loop's answer when it
        had none) and says why in the trace's ``error``."""
        prompt = self._answer_request(result, at)
        if prompt is None or self.llm is None:
            yield result.answer
            return
        text, error = "", None
        try:
            with _scope(at):
                chunks = self.llm.stream_complete(prompt)
            for chunk in iterate_with_deadline(chunks, at):
                text += chunk.delta or ""
                yield chunk.delta or ""
        except Exception as exc:  # noqa: BLE001 - sorted by _cut
            error = self._cut(exc, at)
        if error and not text:
            text = result.answer
            yield text
        self._settle(result, metadata, text, 1, error)

    async def _astream_answer(
        self, result: DocMemoResult, metadata: dict[str, Any], at: float | None
    ) -> AsyncGenerator[str, None]:
        prompt = self._answer_request(result, at)
        if prompt is None or self.llm is None:
            yield result.answer
            return
        text, error = "", None
        try:
            with _scope(at):
                chunks = await await_with_deadline(self.llm.astream_complete(prompt), at)
            async for chunk in aiterate_with_deadline(chunks, at):
                text += chunk.delta or ""
                yield chunk.delta or ""
        except Exception as exc:  # noqa: BLE001 - sorted by _cut
            error = self._cut(exc, at)
        if error and not text:
            text = result.answer
            yield text
        self._settle(result, metadata, text, 1, error)

    def retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        """The evidence pages the full loop finds for the query."""
        return self.run(query_bundle.query_str).source_nodes

    async def aretrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        return (await self.arun(query_bundle.query_str)).source_nodes

    def synthesize(
        self,
        query_bundle: QueryBundle,
        nodes: list[NodeWithScore],
        additional_source_nodes: list[NodeWithScore] | None = None,
    ) -> RESPONSE_TYPE:
        """One reading of the given page nodes by the reader (no retrieval)."""
        inp = self._input_for_nodes(query_bundle.query_str, nodes)
        with counting_llm_calls() as tally:
            feedback = self.reader.read(inp)
        return self._synthesized(inp, nodes, additional_source_nodes, feedback, tally.calls)

    async def asynthesize(
        self,
        query_bundle: QueryBundle,
        nodes: list[NodeWithScore],
        additional_source_nodes: list[NodeWithScore] | None = None,
    ) -> RESPONSE_TYPE:
        inp = self._input_for_nodes(query_bundle.query_str, nodes)
        with counting_llm_calls() as tally:
            feedback = await self.reader.aread(inp)
        return self._synthesized(inp, nodes, additional_source_nodes, feedback, tally.calls)

    def _synthesized(
        self,
        inp: ReaderInput,
        nodes: list[NodeWithScore],
        additional_source_nodes: list[NodeWithScore] | None,
        feedback: Feedback,
        calls: int,
    ) -> Response:
        shown = [p.ref for p in inp.pages]
        feedback, _ = sanitize_feedback(
            feedback, shown, shown, self.config.loop.max_label_changes_per_round
        )
        answer = feedback.answer or self.reader.synthesize(inp.question, feedback.notes, None)
        return Response(
            response=answer,
            source_nodes=list(nodes) + list(additional_source_nodes or []),
            metadata={"docmemo": {"status": feedback.status, "llm_calls": calls}},
        )

    def _input_for_nodes(self, question: str, nodes: list[NodeWithScore]) -> ReaderInput:
        question = clean_question(question, self.config)
        pages = [
            PageView(
                ref=node_ref(n),
                text=n.node.get_content(),
                section=n.node.metadata.get("section", ""),
            )
            for n in nodes
            if is_page(n)
        ]
        crops = [crop_view(n) for n in nodes if n.node.metadata.get("kind") not in (None, "page")]
        return ReaderInput(
            question=question, query=question, pages=pages, crops=crops, final_round=True
        )


def _scope(at: float | None) -> contextlib.AbstractContextManager[object]:
    """Requests of ``OpenAICompatible`` made inside carry the deadline ``at`` (a stalled
    stream is cut at it, not at the client's read timeout)."""
    return contextlib.nullcontext() if at is None else deadline_scope(remaining(at))
