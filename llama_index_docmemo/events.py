"""LlamaIndex instrumentation events fired by the DocMemo loop, one pair per round."""

from __future__ import annotations

from llama_index.core.instrumentation.events.base import BaseEvent


class DocMemoRoundStartEvent(BaseEvent):
    """A round begins: the query it retrieves with."""

    round: int
    query: str

    @classmethod
    def class_name(cls) -> str:
        return "DocMemoRoundStartEvent"


class DocMemoRoundEndEvent(BaseEvent):
    """A round ends: the pages it read and the reasoner's verdict."""

    round: int
    pages: list[str]
    status: str
    useful: list[str]

    @classmethod
    def class_name(cls) -> str:
        return "DocMemoRoundEndEvent"
