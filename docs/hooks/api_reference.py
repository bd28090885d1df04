"""mkdocs hook: the API page names objects by their public path, and lists every one of them.

``docs/api.md`` writes ``::: llama_index_docmemo.DocMemoIndex``; the package exports its names
lazily (a module ``__getattr__``), which mkdocstrings cannot follow statically, so each entry is
pointed at the module that defines the object, found at build time. Internal modules can move
without the page changing, and a public name missing from the page fails the build.
"""

from __future__ import annotations

import importlib
import re
from typing import Any

from mkdocs.exceptions import PluginError

PACKAGE = "llama_index_docmemo"
API_PAGE = "api.md"
_ENTRY = re.compile(rf"^::: {PACKAGE}\.(\w+)$", re.MULTILINE)


def on_page_markdown(markdown: str, page: Any, **_: Any) -> str:
    """Resolve the API page's entries; other pages pass through."""
    if page.file.src_uri != API_PAGE:
        return markdown
    package = importlib.import_module(PACKAGE)
    public = set(package.__all__)
    listed = set(_ENTRY.findall(markdown))
    if missing := sorted(public - listed):
        raise PluginError(f"{API_PAGE} does not document these public names: {missing}")
    if unknown := sorted(listed - public):
        raise PluginError(f"{API_PAGE} documents names {PACKAGE} does not export: {unknown}")

    def resolve(match: re.Match[str]) -> str:
        name = match.group(1)
        return f"::: {getattr(package, name).__module__}.{name}"

    return _ENTRY.sub(resolve, markdown)
