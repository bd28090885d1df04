"""What LLM servers taught, keyed by (base URL, model), in a memory an owner holds.

"auto" structured output remembers the request form a server accepted; a context-overflow
error teaches the real context window and a tighter characters-per-token ratio; a server that
refused list or image content is sent text from then on. There is no process-wide memory: an
:class:`~llama_index_docmemo.OpenAICompatible` holds one, a reader of any other LLM class holds
its own, and an engine gives its reader and reranker one (what one learns, the other knows). An
app shares what was learnt by passing one :class:`ServerMemory` to several LLMs or engines.
"""

from __future__ import annotations

import dataclasses
import pickle
import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from cachetools import LRUCache

if TYPE_CHECKING:
    from llama_index.core.llms import LLM


@dataclass(frozen=True)
class ServerFacts:
    """Learned facts about one server and model; None means not known yet."""

    structured_mode: str | None = None
    context_window: int | None = None
    chars_per_token: float | None = None
    models_checked: bool = False
    refuses_images: bool = False


def server_key(llm: LLM) -> str | None:
    """``"<base URL>#<model>"`` of a networked LLM (None when it names no server)."""
    base = getattr(llm, "api_base", None) or getattr(llm, "base_url", None)
    if not isinstance(base, str) or not base:
        return None
    model = getattr(llm, "model", None)
    return f"{base.rstrip('/')}#{model if isinstance(model, str) else ''}"


def endpoint(llm: LLM) -> str:
    """The LLM as an error names it: its model and base URL, or its class and model name."""
    model = getattr(llm, "model", None) or getattr(llm.metadata, "model_name", None)
    base = getattr(llm, "api_base", None) or getattr(llm, "base_url", None)
    where = f" at {base}" if isinstance(base, str) and base else ""
    return f"{type(llm).__name__} model {model!r}{where}"


class ServerMemory:
    """:class:`ServerFacts` per server key, at most ``capacity`` servers (the least recently
    used are forgotten first: ``cachetools.LRUCache``). Thread-safe (a lock around each read
    and update: concurrent queries learn into one memory); a pickled copy (a worker process)
    starts from what was learnt so far and learns on its own."""

    def __init__(self, capacity: int = 256) -> None:
        if capacity < 1:
            raise ValueError(f"capacity must be positive, got {capacity}")
        self._facts: LRUCache[str, ServerFacts] = LRUCache(maxsize=capacity)
        self._lock = threading.Lock()

    def get(self, key: str) -> ServerFacts:
        with self._lock:
            return self._facts.get(key) or ServerFacts()

    def update(self, key: str, **facts: Any) -> ServerFacts:
        """Set some facts of one server (atomically); returns the updated record."""
        with self._lock:
            value = dataclasses.replace(self._facts.get(key) or ServerFacts(), **facts)
            self._facts[key] = value
            return value

    def forget(self, key: str | None = None) -> None:
        """Forget one server (every server when None): the next request learns afresh."""
        with self._lock:
            if key is None:
                self._facts.clear()
            else:
                self._facts.pop(key, None)

    def __getstate__(self) -> dict[str, Any]:
        """What was learnt, in its order of use, taken under the lock (a lock does not pickle)."""
        with self._lock:
            return {"facts": pickle.dumps(self._facts)}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self._facts = pickle.loads(state["facts"])  # noqa: S301 - our own bytes, just written
        self._lock = threading.Lock()


def memory_for(llm: LLM, memory: ServerMemory | None = None) -> ServerMemory:
    """The memory a reader of ``llm`` consults: the LLM's own when it keeps one
    (:class:`~llama_index_docmemo.OpenAICompatible`: its requests and the reader's learn into
    one place), else ``memory``, else a new one.

    Raises:
        ValueError: ``memory`` is not the one the LLM keeps (the two would learn apart).
    """
    own = getattr(llm, "server_memory", None)
    if not isinstance(own, ServerMemory):
        return memory if memory is not None else ServerMemory()
    if memory is not None and memory is not own:
        raise ValueError(
            f"{endpoint(llm)} keeps its own server memory; pass the shared ServerMemory to the "
            "LLM (server_memory=) rather than to its reader"
        )
    return own
