"""Errors a user can act on: each names the file, page, field, extra or URL concerned."""

from __future__ import annotations


class DocMemoError(Exception):
    """Base class of every error this package raises on purpose."""


class IngestError(DocMemoError):
    """A file could not be read as a PDF (corrupt, encrypted, empty, not a PDF...)."""

    def __init__(self, path: str, reason: str, page: int | None = None) -> None:
        self.path = path
        self.reason = reason
        self.page = page
        where = f"{path} (page {page})" if page is not None else path
        super().__init__(f"{where}: {reason}")


class MissingExtraError(DocMemoError, ImportError):
    """An optional backend was used without its extra installed."""

    def __init__(self, feature: str, extra: str, module: str) -> None:
        self.extra = extra
        super().__init__(
            f"{feature} needs the '{extra}' extra (module '{module}' is not importable): "
            f"pip install 'llama-index-docmemo[{extra}]'"
        )


class StoreError(DocMemoError):
    """The page store could not be opened, or does not match what is asked of it."""


class LLMError(DocMemoError):
    """The LLM endpoint did not answer usefully (down, timed out, or kept failing)."""


class QuestionError(DocMemoError, ValueError):
    """A question the loop refuses: empty, or longer than ``max_question_chars``."""
