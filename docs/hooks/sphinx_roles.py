"""griffe extension: the docstrings' Sphinx roles become Markdown cross-references on the site.

The package's docstrings name objects the Sphinx way (``:class:`~llama_index_docmemo.PageStore```,
``:meth:`from_documents```, ``:mod:`.matching```), which mkdocstrings shows as raw text. Each role
becomes a Markdown link to the object's API page where it names a public object (or a member of
one): ``[`PageStore`][llama_index_docmemo.store.base.PageStore]``, resolved by mkdocs-autorefs;
anything else (internal modules, functions, attributes) becomes inline code. The docstrings stay
as they are for ``help()`` and IDEs.
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Mapping
from typing import Any

import griffe

PACKAGE = "llama_index_docmemo"
ROLE = re.compile(r":(?:py:)?(?:class|func|meth|mod|attr|data|exc|obj|const):`(?P<target>[^`]+)`")


def public_targets() -> dict[str, str]:
    """Each public name of the package -> the identifier its API page renders (defining module)."""
    package = importlib.import_module(PACKAGE)
    return {name: f"{getattr(package, name).__module__}.{name}" for name in package.__all__}


def markdown_refs(text: str, public: Mapping[str, str]) -> str:
    """``text`` with every Sphinx role rewritten: a link where the target is a public object, its
    class where it is a member of one (``DocMemoIndex.from_store``), else inline code. A role's
    ``~`` shows the last part only, as Sphinx does; an explicit title (``Title <target>``) is kept."""

    def rewrite(match: re.Match[str]) -> str:
        target = match.group("target").strip()
        title = None
        explicit = re.fullmatch(r"(?P<title>.+?)\s*<(?P<target>[^>]+)>", target)
        if explicit:
            title, target = explicit.group("title"), explicit.group("target")
        short = target.startswith("~")
        path = target.lstrip("~").lstrip(".")
        parts = path.split(".")
        shown = title or (parts[-1] if short else path)
        for at in range(len(parts) - 1, -1, -1):
            if parts[at] in public:
                return f"[`{shown}`][{public[parts[at]]}]"
        return f"`{shown}`"

    return ROLE.sub(rewrite, text)


class SphinxRoles(griffe.Extension):
    """Rewrites each loaded object's docstring (:func:`markdown_refs`) before it is rendered."""

    def __init__(self) -> None:
        self.public = public_targets()

    def on_instance(self, *, obj: griffe.Object, **_: Any) -> None:
        if obj.docstring is not None and ":" in obj.docstring.value:
            obj.docstring.value = markdown_refs(obj.docstring.value, self.public)
