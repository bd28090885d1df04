"""No import circle inside ``loop/``: the rules, the reading and the result code get the state
(a value) and the runner, never the rounds.

Every import counts, the ones under ``TYPE_CHECKING`` and inside functions too: a circle hidden
from the interpreter is still a circle for a reader (and for the next refactoring).
"""

from __future__ import annotations

import ast
from pathlib import Path

import llama_index_docmemo.loop as loop_package

PACKAGE = "llama_index_docmemo.loop"
LOOP_DIR = Path(loop_package.__file__).parent


def _module_name(path: Path) -> str:
    return PACKAGE if path.stem == "__init__" else f"{PACKAGE}.{path.stem}"


def _imported(tree: ast.Module, module: str, is_package: bool) -> set[str]:
    """The modules of ``loop/`` that ``tree`` imports (package imports name ``__init__``)."""
    parent = module if is_package else module.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = parent.rsplit(".", node.level - 1)[0] if node.level > 1 else parent
                base = f"{anchor}.{base}" if base else anchor
            names = [base] + [f"{base}.{alias.name}" for alias in node.names]
        else:
            continue
        for name in names:
            if name == PACKAGE or name.startswith(PACKAGE + "."):
                top = ".".join(name.split(".")[:4])  # llama_index_docmemo.loop.<module>
                if top == PACKAGE or (LOOP_DIR / f"{top.rsplit('.', 1)[1]}.py").exists():
                    found.add(top)
    found.discard(module)
    return found


def import_graph(folder: Path) -> dict[str, set[str]]:
    graph = {}
    for path in sorted(folder.glob("*.py")):
        module = _module_name(path)
        tree = ast.parse(path.read_text(), str(path))
        graph[module] = _imported(tree, module, path.stem == "__init__")
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import circle of ``graph`` (as a path that returns to its start), or None."""
    done: set[str] = set()

    def visit(node: str, path: list[str]) -> list[str] | None:
        if node in path:
            return path[path.index(node) :] + [node]
        if node in done:
            return None
        for nxt in sorted(graph.get(node, ())):
            cycle = visit(nxt, [*path, node])
            if cycle:
                return cycle
        done.add(node)
        return None

    for start in sorted(graph):
        cycle = visit(start, [])
        if cycle:
            return cycle
    return None


def test_no_import_circle_inside_loop() -> None:
    graph = import_graph(LOOP_DIR)
    # the walk sees the real edges (a walk that found nothing would pass vacuously)
    assert f"{PACKAGE}.reading" in graph[f"{PACKAGE}.query"]
    assert f"{PACKAGE}.state" in graph[f"{PACKAGE}.result"]
    cycle = find_cycle(graph)
    assert cycle is None, "import circle in loop/: " + " -> ".join(cycle or [])


def test_reading_and_result_never_import_the_loop() -> None:
    graph = import_graph(LOOP_DIR)
    for module in ("reading", "result", "state", "runner"):
        assert f"{PACKAGE}.query" not in graph[f"{PACKAGE}.{module}"], module
        assert PACKAGE not in graph[f"{PACKAGE}.{module}"], module


def test_the_walk_finds_circles_hidden_under_type_checking(tmp_path: Path) -> None:
    (tmp_path / "query.py").write_text("from llama_index_docmemo.loop.reading import f\n")
    (tmp_path / "reading.py").write_text(
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n"
        "    from llama_index_docmemo.loop.query import query_steps\n"
    )
    graph = {
        _module_name(p): _imported(ast.parse(p.read_text()), _module_name(p), False)
        for p in tmp_path.glob("*.py")
    }
    assert find_cycle(graph) == [f"{PACKAGE}.query", f"{PACKAGE}.reading", f"{PACKAGE}.query"]
