"""One structured exchange with any LlamaIndex LLM (prompt -> request -> parsed reply), written
once as steps (``step_runtime.py``).

The neutral place the reader (``readers/``), the page reranker (``postprocessors/``) and the
indexer's page summaries (``ingest/summaries.py``) share, so that none imports another: the
request's parts (text and :class:`ImageSlot`, :func:`to_messages`), the prompts mixin, the
lenient reply types (:data:`LocalNumber`, :data:`Text`, :class:`ReplyModel`, :class:`ReplyLimits`)
and the exchange itself. Each caller asks for its own reply model (``readers/base.py``,
``ingest/summaries.py``) the same way:

1. the request is built (page images loaded: I/O) and fitted to the model's context window;
2. it is sent through LlamaIndex's structured-output interface (``structured_predict`` /
   ``astructured_predict``), so each LLM class uses its provider's native form: OpenAI's
   ``json_schema``, Ollama's ``format``, tool calls for function-calling models,
   :class:`~llama_index_docmemo.OpenAICompatible`'s server fallbacks. Only an LLM with no native
   form (LlamaIndex would paste the schema into the prompt, e.g. ``OpenAILike`` in front of an
   unknown server) is asked here with the schema in the system turn, and gets one repair
   request when its reply is not the JSON asked for;
3. a server that refuses list or image content (llama.cpp's server with a text model, vLLM or
   Ollama with a model without vision) is asked once more with the request rebuilt as text; the
   server is remembered as text-only in the caller's server memory (``llms/servers.py``) with
   one warning;
4. a server that says the prompt overflowed its window teaches the window and a tighter
   characters-per-token ratio, and the request is fitted again and sent once more.

A reply that stays malformed ends the exchange with ``None`` (the caller's round brings no
labels); any other failure propagates.
"""

from __future__ import annotations

import dataclasses
import logging
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated, Any, Literal, TypeVar

from llama_index.core.base.llms.types import (
    ChatMessage,
    ContentBlock,
    ImageBlock,
    MessageRole,
    TextBlock,
)
from llama_index.core.output_parsers.base import OutputParserException
from llama_index.core.prompts import BasePromptTemplate, ChatPromptTemplate
from llama_index.core.prompts.mixin import PromptDictType, PromptMixin, PromptMixinType
from llama_index.core.types import PydanticProgramMode
from pydantic import BaseModel, BeforeValidator, ValidationError, WithJsonSchema

from llama_index_docmemo.llms.context import (
    ContextBudget,
    ContextWindowError,
    fit_messages,
    learned_ratio,
    parse_overflow,
)
from llama_index_docmemo.llms.servers import ServerMemory, server_key
from llama_index_docmemo.llms.structured import (
    ReplyError,
    ask_with_schema_in_prompt,
    refuses_content,
)
from llama_index_docmemo.step_runtime import Steps, either, offload

if TYPE_CHECKING:
    from llama_index.core.llms import LLM

logger = logging.getLogger(__name__)

M = TypeVar("M", bound=BaseModel)


def malformed(error: BaseException, model: type[BaseModel]) -> bool:
    """Whether a structured-output call failed because the reply is not a ``model`` (rather
    than for any other reason, which must propagate): its validation error, or the parse
    errors LlamaIndex's programs and this package raise for a reply without the JSON asked for.
    """
    if isinstance(error, ReplyError | OutputParserException):
        return True
    if isinstance(error, ValidationError):
        return error.title in _model_names(model)
    text = str(error)
    return isinstance(error, ValueError | TypeError) and (
        model.__name__ in text or "Could not extract json" in text
    )


def _model_names(model: type[BaseModel]) -> set[str]:
    """The reply model's name and those of the models nested in it."""
    return {model.__name__, *model.model_json_schema().get("$defs", {})}


Build = Callable[[bool], Steps[list[ChatMessage]]]
"""Builds the request, with page images (True) or as text only (False)."""


def images_in(messages: list[ChatMessage]) -> int:
    return sum(isinstance(b, ImageBlock) for m in messages for b in m.blocks)


def native_structured_output(llm: LLM) -> bool:
    """Whether LlamaIndex asks ``llm`` for structured output in a native form (schema-constrained
    decoding or tool calls), rather than by pasting the schema into the prompt."""
    from llama_index.core.llms import LLM as BaseLLM

    if llm.pydantic_program_mode != PydanticProgramMode.DEFAULT:
        return True  # the app chose a program: LlamaIndex runs it
    from llama_index.llms.openai import OpenAI
    from llama_index.llms.openai.utils import is_json_schema_supported

    from llama_index_docmemo.llms.openai_compatible import OpenAICompatible

    if isinstance(llm, OpenAICompatible):
        return True
    if isinstance(llm, OpenAI):  # OpenAI and OpenAILike: json_schema by model, else tools
        return is_json_schema_supported(llm.model) or _function_calling(llm)
    owner = next(c for c in type(llm).__mro__ if "structured_predict" in c.__dict__)
    if owner is not BaseLLM:
        return True  # the class has its own form (Ollama's format, Gemini's response schema)
    return _function_calling(llm)


def _function_calling(llm: LLM) -> bool:
    try:
        return bool(llm.metadata.is_function_calling_model)
    except Exception:  # metadata of an unknown model (OpenAI raises for a name it lacks)
        return False


def context_budget(llm: LLM, memory: ServerMemory) -> ContextBudget | None:
    """What a prompt to ``llm`` may hold: its own budget (OpenAICompatible), else its metadata
    tightened by what its server taught ``memory`` (None: unknown)."""
    own = getattr(llm, "context_budget", None)
    if callable(own):
        return own()
    try:
        meta = llm.metadata
    except Exception:  # an unknown model name: no window to fit to
        return None
    reply = meta.num_output if meta.num_output > 0 else min(1024, meta.context_window // 4)
    budget = ContextBudget(window=meta.context_window, reply_tokens=reply, tokens_per_image=1024)
    key = server_key(llm)
    facts = memory.get(key) if key else None
    if facts is not None and facts.context_window:
        budget = dataclasses.replace(budget, window=min(budget.window, facts.context_window))
    if facts is not None and facts.chars_per_token:
        budget = dataclasses.replace(budget, chars_per_token=facts.chars_per_token)
    return budget


def _fit(
    budget: ContextBudget | None, messages: list[ChatMessage], where: str
) -> list[ChatMessage]:
    if budget is None:
        return messages
    fitted = fit_messages(messages, budget, where=where)
    dropped = images_in(messages) - images_in(fitted)
    if dropped:
        logger.info(
            "%s: %d of %d images left out to fit the context window (%d tokens); their pages are "
            "sent as text",
            where,
            dropped,
            images_in(messages),
            budget.window,
        )
    return fitted


def _learn(
    llm: LLM, memory: ServerMemory, sent: list[ChatMessage], prompt_tokens: int, window: int
) -> None:
    """After an overflow error: the server's window and a tighter characters-per-token ratio."""
    key = server_key(llm)
    budget = context_budget(llm, memory)
    if key is None or budget is None:
        return
    text_tokens = prompt_tokens - images_in(sent) * budget.tokens_per_image
    chars = sum(len(b.text) for m in sent for b in m.blocks if isinstance(b, TextBlock))
    ratio = learned_ratio(chars, text_tokens, budget.chars_per_token)
    memory.update(key, chars_per_token=ratio, context_window=window)
    logger.info(
        "%s: a prompt of %d chars was %d tokens; now %.2f chars/token",
        key,
        chars,
        prompt_tokens,
        ratio,
    )


def _overflow(llm: LLM, memory: ServerMemory, error: Exception) -> tuple[int, int] | None:
    """(window, prompt tokens) when ``error`` says the prompt did not fit."""
    if isinstance(error, ContextWindowError) and error.window and error.prompt_tokens:
        return error.window, error.prompt_tokens
    budget = context_budget(llm, memory)
    return parse_overflow(str(error), budget.reply_tokens if budget else 0)


def _refuses_content(
    llm: LLM, memory: ServerMemory, error: Exception, sent: list[ChatMessage]
) -> bool:
    """Whether the server refused the request's images or list content (then: text only)."""
    if not images_in(sent) or not refuses_content(str(error)):
        return False
    key = server_key(llm)
    if key is not None:
        if not memory.get(key).refuses_images:
            logger.warning(
                "%s refused image content (%s); sending its requests as text from now on",
                key,
                " ".join(str(error).split())[:200],
            )
        memory.update(key, refuses_images=True)
    else:
        logger.warning("%s refused image content; asking again as text", type(llm).__name__)
    return True


def request_messages(
    system: str, parts: Sequence[Part] | str, images: Mapping[ImageSlot, ImageBlock]
) -> Steps[list[ChatMessage]]:
    """Steps: :func:`to_messages`, off the event loop
    under the async driver when the request carries images: LlamaIndex validates each image
    block again as a message takes it (its base64 decoded twice and encoded once: about 1 ms a
    10-K page at Qwen-VL's size, held under the GIL)."""
    if not images:
        return to_messages(system, parts, images)
    return (yield offload(to_messages, system, parts, images))


def _ask_native(llm: LLM, messages: list[ChatMessage], model: type[M]) -> Steps[M | None]:
    # a template scans its blocks for variables, each image's base64 decoded: off the loop too
    prompt = yield offload(ChatPromptTemplate, message_templates=messages)
    try:
        return (yield either(llm.structured_predict, llm.astructured_predict, model, prompt))
    except Exception as problem:
        if not malformed(problem, model):
            raise
        logger.warning("%s reply did not validate (%s); ignored", model.__name__, problem)
        return None


def ask_structured(
    llm: LLM,
    build: Build,
    model: type[M],
    *,
    send_images: bool,
    what: str,
    memory: ServerMemory,
) -> Steps[M | None]:
    """Ask ``llm`` for a ``model`` reply to the request ``build`` makes (see the module
    docstring); None when the reply is malformed. ``memory``: the caller's server memory (the
    LLM's own for an OpenAICompatible, see :func:`~llama_index_docmemo.llms.servers.memory_for`),
    consulted and taught."""
    where = f"{server_key(llm) or type(llm).__name__} ({what})"
    key = server_key(llm)
    if send_images and key is not None and memory.get(key).refuses_images:
        send_images = False
    messages = yield from build(send_images)
    budget = yield offload(context_budget, llm, memory)
    native = native_structured_output(llm)
    refitted = fell_back = False
    while True:
        fitted = _fit(budget, messages, where)
        try:
            if native:
                reply = yield from _ask_native(llm, fitted, model)
            else:
                reply = yield from ask_with_schema_in_prompt(llm, fitted, model)
            return reply
        except Exception as error:  # noqa: BLE001 - two kinds are recovered from, once each
            overflow = None if refitted else _overflow(llm, memory, error)
            if overflow is not None:
                refitted = True
                _learn(llm, memory, fitted, overflow[1], overflow[0])
                budget = yield offload(context_budget, llm, memory)
                continue
            if not fell_back and _refuses_content(llm, memory, error, fitted):
                fell_back = True
                messages = yield from build(False)
                continue
            raise


# -- building a request: a system turn and a user turn of text and image slots ----------
class SystemReplyPrompts(PromptMixin):
    """Prompts of an LLM component that sends a system turn and a reply instruction, both
    changeable through ``get_prompts()`` / ``update_prompts()`` as ``system`` and ``reply``."""

    system_prompt: BasePromptTemplate
    reply_prompt: BasePromptTemplate

    def _get_prompts(self) -> PromptDictType:
        return {"system": self.system_prompt, "reply": self.reply_prompt}

    def _update_prompts(self, prompts_dict: PromptDictType) -> None:
        self.system_prompt = prompts_dict.get("system", self.system_prompt)
        self.reply_prompt = prompts_dict.get("reply", self.reply_prompt)

    def _get_prompt_modules(self) -> PromptMixinType:
        return {}


@dataclass(frozen=True)
class ImageSlot:
    """Where an image goes: ``kind`` page/crop, ``index`` into the pages/crops list."""

    kind: Literal["page", "crop"]
    index: int


Part = str | ImageSlot


def to_messages(
    system: str, parts: Sequence[Part] | str, images: Mapping[ImageSlot, ImageBlock]
) -> list[ChatMessage]:
    """A system turn and one user turn of text and image blocks (slots without images vanish,
    adjacent text is joined, so a request without images is plain string content)."""
    blocks: list[ContentBlock] = []
    for part in [parts] if isinstance(parts, str) else parts:
        if isinstance(part, ImageSlot):
            if part in images:
                blocks.append(images[part])
        elif blocks and isinstance(blocks[-1], TextBlock):
            blocks[-1] = TextBlock(text=blocks[-1].text + part)
        else:
            blocks.append(TextBlock(text=part))
    return [
        ChatMessage(role=MessageRole.SYSTEM, content=system),
        ChatMessage(role=MessageRole.USER, blocks=blocks),
    ]


def clip_lines(text: str, limit: int) -> str:
    """``text`` cut to ``limit`` characters at a line or word boundary, keeping line breaks."""
    text = text.strip()
    if len(text) <= limit:
        return text
    head = text[:limit]
    cut = max(head.rfind("\n"), head.rfind(" "))
    if cut < limit // 2:
        cut = limit
    return head[:cut].rstrip() + f"\n[… {len(text) - cut} more characters not shown]"


# -- reading a reply as untrusted data --------------------------------------------------
_LOCAL_NUMBER = re.compile(r"^\s*\[?\s*(?:page\s*)?(\d{1,6})\s*\]?\s*$", re.IGNORECASE)


def _local_number(value: Any) -> int | None:
    """A page number as the model may write it (3, "3", "[3]", "page 3"); None otherwise."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str):
        match = _LOCAL_NUMBER.match(value)
        return int(match.group(1)) if match else None
    return None


def _text(value: Any) -> Any:
    """Numbers where text is expected become text; other types are left for validation."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return str(value)
    return value


LocalNumber = Annotated[
    int | None, BeforeValidator(_local_number), WithJsonSchema({"type": "integer"})
]
"""A page number [1]..[n] as shown; lenient on input, a plain integer in the schema."""
Text = Annotated[str, BeforeValidator(_text)]
OptionalText = Annotated[str | None, BeforeValidator(_text)]


class ReplyModel(BaseModel):
    """A reply model: lenient on input, extra fields ignored."""

    model_config = {"extra": "ignore"}


@dataclass(frozen=True)
class ReplyLimits:
    """Bounds on what one reply can put into the memories (and into later prompts)."""

    max_notes: int = 20
    max_missing: int = 8
    answer_chars: int = 4000
    fact_chars: int = 500
    quote_chars: int = 400
    missing_chars: int = 300
    query_chars: int = 500
    summary_chars: int = 400


def clip(text: str, limit: int) -> str:
    """``text`` whitespace-normalised and cut to ``limit`` characters at a word boundary."""
    text = " ".join(text.split())
    if len(text) <= limit:
        return text
    cut = text[:limit].rsplit(" ", 1)[0] if " " in text[:limit] else text[:limit]
    return cut.rstrip() + "…"
