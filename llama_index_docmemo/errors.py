"""Errors a user can act on: each names the file, page, field, extra or URL concerned.

A file name is shown through :func:`printable`, so that no name can break or forge a message.
"""

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


class DocumentIdentityError(DocMemoError, ValueError):
    """Documents that do not say which file they come from, where their pages show that they
    come from several (two ``report.pdf`` of different folders without ``file_path``)."""


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


class NoStoreError(StoreError):
    """A store opened for the encoder it records where there is no store yet."""


class DocumentRejectedError(StoreError):
    """The store refused one document before writing anything (a name it cannot hold, a bad
    embedding): that document fails, the store is fine and a batch goes on."""


class LLMError(DocMemoError):
    """The LLM endpoint did not answer usefully (down, timed out, or kept failing)."""


class MalformedReplyError(LLMError):
    """The LLM endpoint answered with something that is not a usable reply (not JSON, no
    choices, fields of the wrong type); the message names the URL, the model and what was
    wrong."""


class DeadlineExceeded(DocMemoError, TimeoutError):
    """A deadline passed: of one LLM request (its total, retries included) or of a query's
    ``max_seconds``; the work in flight was cancelled or abandoned."""


class QuestionError(DocMemoError, ValueError):
    """A question the loop refuses: empty, or longer than ``max_question_chars``."""


_SURROGATE_ESCAPES = range(0xDC80, 0xDD00)
"""How ``os.fsdecode`` keeps the bytes of a file name that are not UTF-8 (``surrogateescape``)."""


def printable(text: str) -> str:
    """``text`` safe to print in a message: control characters escaped (a newline in a file name
    cannot forge a line), bytes of a file name that are not UTF-8 shown as ``\\xff`` (printing
    them raw raises ``UnicodeEncodeError``); other characters, accented letters included, kept."""
    return "".join(char if char.isprintable() else _escaped(char) for char in text)


def _escaped(char: str) -> str:
    if ord(char) in _SURROGATE_ESCAPES:
        return f"\\x{ord(char) - 0xDC00:02x}"
    return repr(char)[1:-1]
