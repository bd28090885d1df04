"""mkdocs hook: the API reference, a page per public name, grouped as ``docs/api.md`` lists them.

``docs/api.md`` lists every public name under its section (``::: llama_index_docmemo.DocMemoIndex``).
The hook checks that the list is complete (a public name missing, or one the package does not
export, fails the build), generates ``api/<Name>.md`` for each name, pointed at the module that
defines the object (the package exports its names lazily, through a module ``__getattr__``, which
mkdocstrings cannot follow statically: internal modules can move without a page changing), turns
``api.md``'s entries into links with each object's one-line summary, and puts the pages in the
navigation under the API reference, by section.
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import re
from pathlib import Path
from typing import Any

from mkdocs.exceptions import PluginError
from mkdocs.structure.files import File, Files, InclusionLevel
from mkdocs.structure.nav import Navigation, Section
from mkdocs.structure.pages import Page

PACKAGE = "llama_index_docmemo"
API_PAGE = "api.md"
_ENTRY = re.compile(rf"^::: {PACKAGE}\.(\w+)$", re.MULTILINE)
NOT_IN_NAV = InclusionLevel.NOT_IN_NAV  # placed by on_nav, not by mkdocs.yml
_SECTION = re.compile(r"^## (.+)$", re.MULTILINE)


def _roles() -> Any:
    """The sibling griffe extension's module (its role rewriting gives the summaries' links)."""
    path = Path(__file__).with_name("sphinx_roles.py")
    spec = importlib.util.spec_from_file_location("sphinx_roles", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def sections(markdown: str) -> list[tuple[str, list[str]]]:
    """(section title, public names) in the order ``api.md`` lists them."""
    found: list[tuple[str, list[str]]] = []
    for part in re.split(r"(?=^## )", markdown, flags=re.MULTILINE):
        title = _SECTION.match(part)
        names = _ENTRY.findall(part)
        if title and names:
            found.append((title.group(1).strip(), names))
    return found


def _listed(config: Any) -> list[tuple[str, list[str]]]:
    source = Path(config["docs_dir"]) / API_PAGE
    listed = sections(source.read_text(encoding="utf-8"))
    package = importlib.import_module(PACKAGE)
    public = set(package.__all__)
    names = {name for _, group in listed for name in group}
    if missing := sorted(public - names):
        raise PluginError(f"{API_PAGE} does not document these public names: {missing}")
    if unknown := sorted(names - public):
        raise PluginError(f"{API_PAGE} documents names {PACKAGE} does not export: {unknown}")
    return listed


def page_markdown(name: str) -> str:
    """The generated page of one public name."""
    module = getattr(importlib.import_module(PACKAGE), name).__module__
    return (
        f"# {name}\n\n```python\nfrom {PACKAGE} import {name}\n```\n\n"
        f"::: {module}.{name}\n    options:\n      show_root_heading: false\n"
        "      heading_level: 2\n"
    )


def on_files(files: Files, config: Any, **_: Any) -> Files:
    """Add ``api/<Name>.md`` for every public name."""
    for _, names in _listed(config):
        for name in names:
            page = File.generated(
                config, f"api/{name}.md", content=page_markdown(name), inclusion=NOT_IN_NAV
            )
            files.append(page)
    return files


def summary(name: str, public: dict[str, str]) -> str:
    """The first sentence of the object's docstring, its Sphinx roles as Markdown links."""
    doc = inspect.getdoc(getattr(importlib.import_module(PACKAGE), name)) or ""
    first = " ".join(doc.split("\n\n", 1)[0].split())
    sentence = re.split(r"(?<=[.!?])\s", first, maxsplit=1)[0]
    return _roles().markdown_refs(sentence, public)


def on_page_markdown(markdown: str, page: Page, **_: Any) -> str:
    """``api.md``: each entry becomes a link to its page with the object's summary."""
    if page.file.src_uri != API_PAGE:
        return markdown
    public = _roles().public_targets()

    def link(match: re.Match[str]) -> str:
        name = match.group(1)
        return f"- [`{name}`](api/{name}.md): {summary(name, public)}"

    return _ENTRY.sub(link, markdown)


def on_nav(nav: Navigation, config: Any, files: Files, **_: Any) -> Navigation:
    """The API reference's navigation item becomes a section: the index, then a section of pages
    per ``api.md`` section."""
    index = files.get_file_from_path(API_PAGE)
    assert index is not None and index.page is not None
    groups = []
    for title, names in _listed(config):
        pages = []
        for name in names:
            file = files.get_file_from_path(f"api/{name}.md")
            assert file is not None
            page = file.page or Page(name, file, config)
            page.title = name
            pages.append(page)
        groups.append(Section(title, pages))
    items = nav.items
    position = next(n for n, item in enumerate(items) if getattr(item, "file", None) is index)
    section = Section("API reference", [index.page, *groups])
    section.parent = index.page.parent
    for group in groups:
        group.parent = section
        for page in group.children:
            page.parent = group
    index.page.parent = section
    index.page.title = "All public names"
    items[position] = section
    at = nav.pages.index(index.page)
    nav.pages[at + 1 : at + 1] = [p for g in groups for p in g.children]
    return nav
