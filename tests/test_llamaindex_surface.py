"""What the package relies on from LlamaIndex stays public, or is pinned and checked here.

``OpenAICompatible`` implements the request hooks of llama-index-llms-openai's ``OpenAI``
(``_chat``, ``_achat``, ``_stream_chat``, ``_astream_chat``) so that the ``openai`` client's
retries are the only ones and a total deadline bounds each request; those hooks are private, so
the dependency has an upper bound and this test fails when a release renames or reshapes them.
Everything else the package uses of LlamaIndex is public, and the README and docs/ import only
from the package's top level (and the eval extra's ``evaluation.compare``).
"""

from __future__ import annotations

import ast
import importlib
import inspect
import re
import textwrap
from pathlib import Path

import pytest
from llama_index.core.base.llms.types import ChatMessage, ChatResponse
from llama_index.llms.openai import OpenAI

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "llama_index_docmemo"
PUBLIC_MODULES = ("llama_index_docmemo", "llama_index_docmemo.evaluation.compare")

HOOKS = {
    "_chat": ["self", "messages", "kwargs"],
    "_achat": ["self", "messages", "kwargs"],
    "_stream_chat": ["self", "messages", "kwargs"],
    "_astream_chat": ["self", "messages", "kwargs"],
    "_get_client": ["self"],
    "_get_aclient": ["self"],
    "_get_model_kwargs": ["self", "kwargs"],
}


@pytest.mark.parametrize(("name", "parameters"), sorted(HOOKS.items()))
def test_the_openai_hooks_openai_compatible_implements_still_exist(name, parameters) -> None:
    hook = getattr(OpenAI, name, None)
    assert hook is not None, f"llama-index-llms-openai has no OpenAI.{name} any more"
    signature = inspect.signature(inspect.unwrap(hook))
    assert list(signature.parameters) == parameters


class _Probe(OpenAI):
    """An OpenAI class whose request hooks answer themselves (no network)."""

    def _chat(self, messages, **kwargs):  # noqa: ANN001, ANN003, ANN202
        return ChatResponse(message=ChatMessage(role="assistant", content="sync hook"))

    async def _achat(self, messages, **kwargs):  # noqa: ANN001, ANN003, ANN202
        return ChatResponse(message=ChatMessage(role="assistant", content="async hook"))


async def test_openai_chat_goes_through_the_chat_hooks() -> None:
    """``chat`` / ``achat`` of a chat model must call ``_chat`` / ``_achat`` (else the deadline
    and error mapping of ``OpenAICompatible`` would be skipped)."""
    llm = _Probe(model="gpt-4o", api_key="sk-test")
    messages = [ChatMessage(role="user", content="hi")]
    assert llm.chat(messages).message.content == "sync hook"
    assert (await llm.achat(messages)).message.content == "async hook"


def _package_sources() -> list[tuple[Path, str]]:
    return [(p, p.read_text()) for p in PACKAGE.rglob("*.py")]


def test_the_package_reads_no_private_llamaindex_settings() -> None:
    offenders = [
        str(path.relative_to(ROOT))
        for path, text in _package_sources()
        if re.search(r"Settings\._[a-z]", text)
    ]
    assert offenders == []


def _python_blocks(markdown: str) -> list[str]:
    blocks = re.findall(r"```python\n(.*?)```", markdown, flags=re.DOTALL)
    return [textwrap.dedent(block) for block in blocks]


def test_the_readme_and_docs_import_only_from_the_top_level() -> None:
    readme = (ROOT / "README.md").read_text()
    assert _python_blocks(readme), "the README has no Python example"
    pages = [readme, *(page.read_text() for page in sorted((ROOT / "docs").glob("*.md")))]
    blocks = [block for page in pages for block in _python_blocks(page)]
    for block in blocks:
        for node in ast.walk(ast.parse(block)):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith(
                "llama_index_docmemo"
            ):
                # the top level, or the public module of the eval extra (not imported by the core)
                assert node.module in PUBLIC_MODULES, node.module
                module = importlib.import_module(node.module)
                for alias in node.names:
                    assert alias.name in getattr(module, "__all__", ()), (node.module, alias.name)
