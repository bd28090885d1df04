"""What this process has learned about each LLM server, keyed by base URL.

"auto" structured output remembers the request form a server accepted; a context-overflow
error teaches the server's real context window and a tighter characters-per-token ratio. Kept
per base URL, not per client object, so every client of one server benefits. Thread-safe.
"""

from __future__ import annotations

import dataclasses
import threading
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class ServerFacts:
    """Learned facts about one server; None means not known yet."""

    structured_mode: str | None = None
    context_window: int | None = None
    chars_per_token: float | None = None
    models_checked: bool = False


class ServerMemory:
    """:class:`ServerFacts` per base URL (trailing slashes ignored)."""

    def __init__(self) -> None:
        self._facts: dict[str, ServerFacts] = {}
        self._lock = threading.Lock()

    @staticmethod
    def _key(base_url: str) -> str:
        return base_url.rstrip("/")

    def get(self, base_url: str) -> ServerFacts:
        with self._lock:
            return self._facts.get(self._key(base_url), ServerFacts())

    def update(self, base_url: str, **facts: Any) -> ServerFacts:
        """Set some facts of one server; returns the updated record."""
        with self._lock:
            key = self._key(base_url)
            updated = dataclasses.replace(self._facts.get(key, ServerFacts()), **facts)
            self._facts[key] = updated
            return updated

    def forget(self, base_url: str | None = None) -> None:
        """Forget one server (every server when None): the next request learns afresh."""
        with self._lock:
            if base_url is None:
                self._facts.clear()
            else:
                self._facts.pop(self._key(base_url), None)


SERVERS = ServerMemory()
"""The process-wide memory every OpenAI-compatible client consults."""
