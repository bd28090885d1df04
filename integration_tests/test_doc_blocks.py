"""Every Python and shell block of README.md and docs/*.md runs, as a newcomer would paste it.

The blocks run in document order in one working folder (so the CLI and Python blocks that chain,
index then ask, share a store), with the ``docmemo`` CLI on PATH, the generated demo report as
``reports/10k.pdf`` and ``filings/10k.pdf``, a ``questions.jsonl``, and scripted OpenAI-compatible
servers (``fake_vllm_server``) standing in for the LLM servers the blocks name: each
``http://localhost:PORT/v1`` or ``http://127.0.0.1:PORT/v1`` of a block is pointed at the
server for that port, and ``OpenAI(model="gpt-4o")`` reaches one through ``OPENAI_API_BASE`` (set for such blocks only).
The folder starts with ``./docmemo_store`` indexed as the README's CLI block does. A block marked ``<!-- skip: reason -->`` is reported as skipped with its reason; the last line
of the run counts blocks run and skipped.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path

import pytest
from doc_blocks import Block, runnable_blocks
from fake_vllm_server import FakeVLLM
from scripted_replies import answer

from llama_index_docmemo.demo.document import write_demo_pdf

pytestmark = pytest.mark.slow  # a subprocess per block

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
BLOCKS = [
    b for page in PAGES for b in runnable_blocks(page.read_text(), str(page.relative_to(ROOT)))
]

SERVERS = {
    "openai": ("gpt-4o", "openai", None),  # OpenAI(model="gpt-4o") through OPENAI_API_BASE
    "8000": ("qwen2.5-vl-7b", "vllm", None),
    "8001": ("JUDGE", "vllm", None),
    "8080": ("smollm2", "llama_cpp", "llama_cpp"),  # a text model: refuses list content
}
"""The scripted server behind each port the docs name: model, flavour, text-only kind."""

_URL = re.compile(r"http://(?:localhost|127\.0\.0\.1):(\d+)/v1")


@pytest.fixture(scope="module")
def servers() -> Iterator[dict[str, FakeVLLM]]:
    with ExitStack() as stack:
        yield {
            port: stack.enter_context(
                FakeVLLM(
                    [],
                    default=answer,
                    model=model,
                    flavour=flavour,
                    text_model=text_model,
                    require_schema=False,
                )
            )
            for port, (model, flavour, text_model) in SERVERS.items()
        }


@pytest.fixture(scope="module")
def workspace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The folder a newcomer would have: PDFs, questions, and ``./docmemo_store`` indexed as the
    README's first CLI line does (so each block also runs alone, ``-k``)."""
    folder = tmp_path_factory.mktemp("doc-blocks")
    for pdf in ("reports/10k.pdf", "filings/10k.pdf", "board/minutes.pdf", "handbook/handbook.pdf"):
        write_demo_pdf(folder / pdf)
    question = {"question": "What does the Board say about the development of the Group?"}
    (folder / "questions.jsonl").write_text(json.dumps(question) + "\n")  # judged pairwise
    index = "docmemo index reports/ --store ./docmemo_store --tenant acme --meta year=2023"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DOCMEMO_LLM", "OPENAI_"))}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    subprocess.run(index.split(), cwd=folder, env=env, check=True, capture_output=True)
    return folder


@pytest.fixture(scope="module")
def tally(request: pytest.FixtureRequest) -> Iterator[dict[str, int]]:
    counts = {"run": 0, "skipped": 0}
    yield counts
    capture = request.config.pluginmanager.get_plugin("capturemanager")
    with capture.global_and_fixture_disabled():
        print(f"\ndoc blocks: {counts['run']} run, {counts['skipped']} skipped")


def pointed_at(code: str, servers: dict[str, FakeVLLM]) -> str:
    """``code`` with every local LLM URL replaced by its scripted server's."""

    def replace(match: re.Match[str]) -> str:
        port = match.group(1)
        if port not in servers:
            raise AssertionError(f"no scripted server for port {port}: add it to SERVERS")
        return servers[port].url

    return _URL.sub(replace, code)


def block_env(block: Block, workspace: Path, servers: dict[str, FakeVLLM]) -> dict[str, str]:
    """The process environment of a block; OpenAI's variables only for a block that builds
    ``OpenAI(...)`` (elsewhere they would make LlamaIndex's default LLM a gpt-3.5-turbo)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DOCMEMO_LLM", "OPENAI_"))}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    env["DOCMEMO_STORE_DIR"] = str(workspace / "default-store")
    env["DOCMEMO_CACHE_DIR"] = str(workspace / "cache")
    if "OpenAI(" in block.code:
        env["OPENAI_API_BASE"] = servers["openai"].url
        env["OPENAI_API_KEY"] = "sk-test"
    return env


@pytest.mark.parametrize("block", BLOCKS, ids=[b.name for b in BLOCKS])
def test_block_runs(
    block: Block, workspace: Path, servers: dict[str, FakeVLLM], tally: dict[str, int]
) -> None:
    if block.skip is not None:
        tally["skipped"] += 1
        pytest.skip(f"{block.name}: {block.skip}")
    script = workspace / f"block.{'py' if block.kind == 'python' else 'sh'}"
    script.write_text(pointed_at(block.code, servers))
    before = {port: len(server.problems) for port, server in servers.items()}
    asked = {port: len(server.requests) for port, server in servers.items()}
    command = (
        [sys.executable, str(script)] if block.kind == "python" else ["bash", "-e", str(script)]
    )
    out = subprocess.run(
        command,
        cwd=workspace,
        env=block_env(block, workspace, servers),
        capture_output=True,
        text=True,
        timeout=300,
    )
    tally["run"] += 1
    problems = [p for port, server in servers.items() for p in server.problems[before[port] :]]
    assert out.returncode == 0, f"{block.name} failed:\n{out.stdout[-1500:]}\n{out.stderr[-3000:]}"
    assert problems == [], problems  # requests a real server would have refused
    named = set(_URL.findall(block.code)) | ({"openai"} if "OpenAI(" in block.code else set())
    silent = sorted(p for p in named if len(servers[p].requests) == asked[p])
    assert silent == [], f"{block.name} never asked the server it names: {silent}"


def test_the_extractor_binds_each_skip_to_its_block_and_reads_indented_fences() -> None:
    text = """intro
```text
not run
```
<!-- skip: needs a GPU and vLLM -->
```bash
vllm serve model
```
- a list item:
  ```python
  print("in a list")
  ```
````console
docmemo where
````
"""
    blocks = runnable_blocks(text, "page.md")
    assert [(b.line, b.kind, b.skip) for b in blocks] == [
        (6, "shell", "needs a GPU and vLLM"),
        (10, "python", None),
        (13, "shell", None),
    ]
    assert blocks[1].code == 'print("in a list")\n' and blocks[2].code == "docmemo where\n"


@pytest.mark.parametrize(
    "text",
    [
        "<!-- skip: a reason -->\n\n```bash\nls\n```\n",  # not right before the fence
        "<!-- skip: a reason -->\n```text\nls\n```\n",  # a block that never runs
        "```python\nprint(1)\n",  # never closed
    ],
)
def test_the_extractor_refuses_markers_that_skip_nothing_and_open_fences(text: str) -> None:
    with pytest.raises(ValueError, match="page.md:1"):
        runnable_blocks(text, "page.md")


def test_the_docs_have_blocks_that_run_on_every_guide() -> None:
    sources = {b.source for b in BLOCKS if b.skip is None}
    assert sources >= {"README.md", "docs/cli.md", "docs/python.md", "docs/compare.md"}


def test_the_readmes_drop_in_is_the_quickstart_with_one_name_changed() -> None:
    readme = [b for b in BLOCKS if b.source == "README.md" and b.kind == "python"]
    before, after = readme[0], readme[1]
    assert before.skip and after.skip is None  # the "after" runs here; the "before" needs OpenAI

    def body(block: Block) -> list[str]:
        return [line for line in block.code.splitlines() if not line.startswith("from ")]

    assert "VectorStoreIndex.from_documents(" in before.code
    assert [line.replace("DocMemoIndex", "VectorStoreIndex") for line in body(after)] == body(before)
    assert 3 <= len([line for line in after.code.splitlines() if line.strip()]) <= 6
