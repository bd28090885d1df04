"""What the package relies on from LlamaIndex stays public.

``OpenAICompatible`` is written on LlamaIndex's public ``LLM`` interface and the ``openai`` SDK:
no class of the package subclasses a llama-index-llms-openai class, and no private member of
it is read or overridden. The package reads no private LlamaIndex setting, and the README and
docs/ import only from the package's top level (and the eval extra's ``evaluation.compare``).
"""

from __future__ import annotations

import ast
import importlib
import inspect
import re
import textwrap
from pathlib import Path

import llama_index.llms.openai
import llama_index.llms.openai_like

import llama_index_docmemo
from llama_index_docmemo.llms import OpenAICompatible, QwenVL

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "llama_index_docmemo"
PUBLIC_MODULES = ("llama_index_docmemo", "llama_index_docmemo.evaluation.compare")
OPENAI_PRIVATE = re.compile(
    r"_get_client|_get_aclient|_get_model_kwargs|_get_credential_kwargs|_http_client"
    r"|\b_(a?stream_)?a?chat\b"
)
"""The private members of llama-index-llms-openai's ``OpenAI`` the package once relied on."""


def _openai_classes() -> set[type]:
    modules = (llama_index.llms.openai, llama_index.llms.openai_like)
    return {
        value
        for module in modules
        for value in vars(module).values()
        if inspect.isclass(value) and value.__module__.startswith("llama_index.llms.openai")
    }


def test_no_class_of_the_package_subclasses_a_llama_index_llms_openai_class() -> None:
    openai_classes = _openai_classes()
    assert openai_classes  # OpenAI, OpenAILike...
    for llm in (OpenAICompatible, QwenVL):
        assert not set(llm.__mro__) & openai_classes, llm
    assert llama_index_docmemo.OpenAICompatible is OpenAICompatible


def test_no_private_member_of_llama_index_llms_openai_is_used() -> None:
    offenders = [
        f"{path.relative_to(ROOT)}:{number}: {line.strip()}"
        for path, text in _package_sources()
        for number, line in enumerate(text.splitlines(), 1)
        if OPENAI_PRIVATE.search(line)
    ]
    assert offenders == []


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
