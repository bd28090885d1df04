"""The docs site's build hooks, pure parts: Sphinx roles to Markdown cross-references, and the
API page's sections (``docs/hooks/``)."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

import pytest

import llama_index_docmemo

HOOKS = Path(__file__).resolve().parents[1] / "docs" / "hooks"


def _hook(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"{name}_hook", HOOKS / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


roles = _hook("sphinx_roles")
PUBLIC = {"PageStore": "pkg.store.base.PageStore", "DocMemoIndex": "pkg.index.DocMemoIndex"}


@pytest.mark.parametrize(
    ("text", "markdown"),
    [
        (":class:`~pkg.store.base.PageStore`", "[`PageStore`][pkg.store.base.PageStore]"),
        (":class:`PageStore`", "[`PageStore`][pkg.store.base.PageStore]"),
        (":class:`pkg.PageStore`", "[`pkg.PageStore`][pkg.store.base.PageStore]"),
        (":meth:`DocMemoIndex.from_store`", "[`DocMemoIndex.from_store`][pkg.index.DocMemoIndex]"),
        (":meth:`~DocMemoIndex.from_store`", "[`from_store`][pkg.index.DocMemoIndex]"),
        (":mod:`.figures`", "`figures`"),
        (":func:`~pkg.loop.citing.boxed_citations`", "`boxed_citations`"),
        (":py:attr:`report`", "`report`"),
        (":class:`the store <PageStore>`", "[`the store`][pkg.store.base.PageStore]"),
        (
            "a :exc:`~pkg.errors.X` or\n:class:`PageStore`.",
            "a `X` or\n[`PageStore`][pkg.store.base.PageStore].",
        ),
        ("no roles: a `code` span, key: value", "no roles: a `code` span, key: value"),
    ],
)
def test_roles_become_links_to_public_objects_or_code(text: str, markdown: str) -> None:
    assert roles.markdown_refs(text, PUBLIC) == markdown


def test_every_public_name_has_a_target_in_its_defining_module() -> None:
    targets = roles.public_targets()
    assert set(targets) == set(llama_index_docmemo.__all__)
    assert targets["PageStore"] == "llama_index_docmemo.store.base.PageStore"


def test_the_api_page_lists_every_public_name_under_a_section() -> None:
    api = _hook("api_reference")
    text = (HOOKS.parent / "api.md").read_text(encoding="utf-8")
    found = api.sections(text)
    names = [name for _, group in found for name in group]
    assert sorted(names) == sorted(llama_index_docmemo.__all__) and len(set(names)) == len(names)
    assert found[0] == (
        "Index, engines, retriever",
        [
            "DocMemoIndex",
            "DocMemoQueryEngine",
            "DocMemoRetriever",
            "DocMemoResult",
            "DocMemoRunner",
            "QueryTrace",
        ],
    )
    page = api.page_markdown("PageStore")
    assert "::: llama_index_docmemo.store.base.PageStore" in page and page.startswith("# PageStore")
