"""Tenant isolation under load: two tenants with near-identical documents of the same file names.

200 queries run through every path a caller can reach — store search, page fetch, listing and
counts; the query engine (sync and async) with a VLM behind a fake OpenAI-compatible server, its
LLM reranker, crops and page images; the engine's and the retriever's ``retrieve``; the CLI's
``search`` and ``ask`` (JSON, with the VLM) and its error over an empty scope — and every output is
scanned for anything of the other tenant: its marker word (on every page it owns), its own
document's name, its folder, its document versions, and, for callers without the group, the
words of an ACL-restricted document. Page images sent to the VLM are checked too: one tenant's
pages are landscape, the other's portrait. The test fails on the first item found and reports
how many items it checked.
"""

from __future__ import annotations

import asyncio
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pymupdf
import pytest
from fake_vllm_server import FakeVLLM, Reply, Request
from llama_index.core.schema import NodeWithScore, QueryBundle

from llama_index_docmemo import cli
from llama_index_docmemo.cli import main
from llama_index_docmemo.config import DocMemoConfig
from llama_index_docmemo.encoders import default_encoder
from llama_index_docmemo.indexing import DocumentIndexer
from llama_index_docmemo.llms import QwenVL
from llama_index_docmemo.llms.images import sizing_for
from llama_index_docmemo.memory.schema import DocumentSchema
from llama_index_docmemo.query_engine import DocMemoQueryEngine
from llama_index_docmemo.store import EdgePageStore, open_store
from llama_index_docmemo.store.scope import PageFilter
from llama_index_docmemo.types import PageRecord, PageRef

MODEL = "qwen-vl-test"
SIZES = {"alpha": (480.0, 320.0), "beta": (320.0, 480.0)}  # landscape vs portrait pages
REGIONS = ("north", "south", "east", "west", "central", "coastal")
QUESTIONS = [
    "What was the revenue in the north region?",
    "What was the revenue in the coastal region on the last page?",
    "What does the first page of the report say?",
    "What does the memo say about hiring?",
    "Which office moves next year according to the memo?",
    "What is in the summary deck?",
    "What are the headline numbers in the summary?",
    "What is in the revenue table?",
    "Which region grew fastest?",
    "What is the secret acquisition target?",
    "What is the budget for the restricted project?",
    "What is in the tenant's own notes?",
    "How many pages does the report have?",
    "What was the revenue in the south region?",
    "What did the east region report?",
    "What is the central region's figure?",
    "What was said on the memo's last page?",
    "What does the deck's first slide say?",
    "Who prepared the report?",
    "What does the document say about risks?",
]


def marker(tenant: str) -> str:
    return f"{tenant.upper()}MARK"


def write_doc(path: Path, tenant: str, pages: list[str], *, table: bool = False) -> Path:
    width, height = SIZES[tenant]
    path.parent.mkdir(parents=True, exist_ok=True)
    doc = pymupdf.open()
    for number, text in enumerate(pages, start=1):
        page = doc.new_page(width=width, height=height)
        page.insert_textbox(pymupdf.Rect(20, 20, width - 20, height / 2), text, fontsize=9)
        if table and number == 3:
            for row in range(3):
                for col in range(3):
                    x0, y0 = 20 + col * (width - 40) / 3, height / 2 + row * 30
                    cell = pymupdf.Rect(x0, y0, x0 + (width - 40) / 3, y0 + 30)
                    page.draw_rect(cell)
                    page.insert_text(
                        (cell.x0 + 4, cell.y0 + 18), f"{marker(tenant)} r{row}c{col}", fontsize=7
                    )
    doc.save(path)
    return path


def write_tenant(root: Path, tenant: str, shift: float) -> Path:
    """The same documents for every tenant, with its own marker, numbers, page shape and extras."""
    mark = marker(tenant)
    folder = root / tenant
    write_doc(
        folder / "report.pdf",
        tenant,
        [f"{mark} Annual report prepared by the finance team. Risks are moderate."]
        + [
            f"{mark} Revenue in the {region} region was {10 + i + shift:.1f} million, "
            f"growth {3 + i} percent."
            for i, region in enumerate(REGIONS)
        ],
        table=True,
    )
    write_doc(
        folder / "memo.pdf",
        tenant,
        [
            f"{mark} Memo: hiring of {20 + shift:.0f} engineers is planned.",
            f"{mark} The Oslo office moves next year.",
            f"{mark} Closing remarks of the memo.",
        ],
    )
    write_doc(
        folder / "deck" / "summary.pdf",
        tenant,
        [f"{mark} Summary slide: headline revenue {60 + shift:.0f} million.", f"{mark} Outlook."],
    )
    write_doc(folder / f"{tenant}-only.pdf", tenant, [f"{mark} The tenant's own notes."])
    write_doc(
        root / f"{tenant}-restricted" / "restricted.pdf",
        tenant,
        [
            f"{mark} {mark}SECRET acquisition target is Nordwind; restricted project budget 9 million."
        ],
    )
    return folder


@dataclass
class Scanner:
    """Finds another tenant's items (or restricted words) in any output; counts items checked."""

    forbidden: dict[str, list[str]]
    restricted: dict[str, str]
    page_images: dict[str, tuple[int, int]]
    checked: int = 0
    found: list[str] = field(default_factory=list)

    def scan(self, tenant: str, groups: tuple[str, ...], what: str, value: Any) -> None:
        text = value if isinstance(value, str) else json.dumps(value, default=str)
        self.checked += 1
        words = list(self.forbidden[tenant])
        if "finance" not in groups:
            words.append(self.restricted[tenant])
        for word in words:
            if word in text:
                self.found.append(f"{tenant} {groups} {what}: {word!r} in {text[:300]!r}")

    def scan_images(self, tenant: str, requests: list[Request]) -> int:
        """Page images of the other tenant have its page shape (crops are checked by their text);
        returns how many of the caller's own page images were seen."""
        own = 0
        for request in requests:
            for size in request.image_sizes:
                self.checked += 1
                own += size == self.page_images[tenant]
                if any(size == shape for t, shape in self.page_images.items() if t != tenant):
                    self.found.append(f"{tenant}: a {size} image (the other tenant's page shape)")
        return own


def sent_size(width: int, height: int) -> tuple[int, int]:
    """The size a page image rendered at ``width x height`` is sent to this test's model at."""
    return sizing_for(QwenVL(api_base="http://127.0.0.1:9/v1", model=MODEL, api_key="x")).size(
        width, height
    )


def node_items(nodes: list[NodeWithScore]) -> list[dict[str, Any]]:
    return [{"text": n.node.get_content(), "meta": n.node.metadata} for n in nodes]


def vlm_reply(request: Request) -> Reply:
    """Echo what the model was shown (so anything leaked into a prompt reaches the outputs)."""
    properties = (request.schema or {}).get("properties", {})
    if set(properties) == {"pages"}:
        return Reply(json.dumps({"pages": [2, 1]}))
    shown = re.findall(r"[A-Z]+MARK[^\n]{0,60}", request.text)
    fact = shown[0] if shown else "nothing shown"
    feedback = {
        "notes": [{"page": 1, "fact": fact}],
        "useful_pages": [1],
        "irrelevant_pages": [],
        "missing": ["more figures"],
        "status": "answered" if "final" in request.text.lower() else "need_more",
        "answer": fact,
        "refined_query": f"revenue {' '.join(shown[1:2])[:40]}",
    }
    return Reply(json.dumps(feedback))


def summarize(schema: DocumentSchema, pages: list[PageRecord]) -> dict[int, str]:
    """Page summaries that carry the page's marker, so a leaked summary is visible."""
    return {p.page: p.text[:60] for p in pages}


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    root = tmp_path_factory.mktemp("leak")
    folders = {"alpha": write_tenant(root, "alpha", 0.0), "beta": write_tenant(root, "beta", 0.5)}
    store_path = root / "store"
    encoder = default_encoder()
    versions: dict[str, list[str]] = {}
    with open_store(store_path, encoder=encoder) as store:
        indexer = DocumentIndexer(store, encoder, ocr=False, summarizer=summarize)
        for tenant, folder in folders.items():
            assert indexer.index_paths([folder], tenant=tenant).ok
            restricted = root / f"{tenant}-restricted"
            assert indexer.index_paths([restricted], tenant=tenant, acl=["finance"]).ok
            everything = PageFilter(tenant=tenant, acl_groups=("finance",))
            versions[tenant] = [s.doc_version for s in store.list_documents(everything)]
        ids = {
            t: sorted(s.doc_id for s in store.list_documents(PageFilter(tenant=t))) for t in folders
        }
    assert ids["alpha"] == ["alpha-only.pdf", "deck/summary.pdf", "memo.pdf", "report.pdf"]
    other = {"alpha": "beta", "beta": "alpha"}
    forbidden = {
        tenant: [
            marker(other[tenant]),
            f"{other[tenant]}-only.pdf",
            str(folders[other[tenant]]),
            str(root / f"{other[tenant]}-restricted"),
            *versions[other[tenant]],
            *(v[:16] for v in versions[other[tenant]]),
        ]
        for tenant in folders
    }
    scanner = Scanner(
        forbidden=forbidden,
        restricted={t: f"{marker(t)}SECRET" for t in folders},
        # the rendered pages' shapes, as the reader sizes them for the model (llms/images.py)
        page_images={"alpha": sent_size(1500, 1000), "beta": sent_size(1000, 1500)},
    )
    return {"store": store_path, "encoder": encoder, "scanner": scanner, "root": root}


def cli_json(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    code = main(args)
    captured = capsys.readouterr()
    return code, captured.out + captured.err


def test_two_tenants_never_see_each_other(
    corpus: dict[str, Any], capsys, caplog, monkeypatch: pytest.MonkeyPatch
) -> None:
    scanner: Scanner = corpus["scanner"]
    store_path: Path = corpus["store"]
    encoder = corpus["encoder"]
    monkeypatch.setattr(cli.options, "encoder", lambda args: encoder)  # load the model once, not 40 times
    combos = [
        (tenant, question, ("finance",) if i % 4 == 3 else ())
        for i, question in enumerate(QUESTIONS)
        for tenant in ("alpha", "beta")
    ]
    operations = 0
    own_images = 0
    loop = (
        asyncio.new_event_loop()
    )  # one loop for every async query (the LLM client is bound to it)
    with FakeVLLM([], default=vlm_reply, model=MODEL) as server:
        # 1) the CLI: one process-level path per combination (search, or ask through the VLM)
        for i, (tenant, question, groups) in enumerate(combos):
            scope = ["--tenant", tenant, *(a for g in groups for a in ("--acl-group", g))]
            before = len(server.requests)
            if i % 2 == 0:
                code, out = cli_json(
                    ["search", question, "--store", str(store_path), "--json", *scope], capsys
                )
            else:
                llm = ["--llm-url", server.url, "--llm-model", MODEL, "--rounds", "2", "-k", "2"]
                code, out = cli_json(
                    ["ask", question, "--store", str(store_path), "--json", *scope, *llm], capsys
                )
            assert code == 0, out
            scanner.scan(tenant, groups, f"cli {question!r}", out)
            scanner.scan(tenant, groups, "cli requests", [r.text for r in server.requests[before:]])
            own_images += scanner.scan_images(tenant, server.requests[before:])
            operations += 1
        for tenant in ("alpha", "beta"):  # the error over an empty scope names own documents only
            code, out = cli_json(
                ["ask", "q?", "--store", str(store_path), "--tenant", tenant, "--doc", "nope.pdf"],
                capsys,
            )
            assert code == 2 and f"{tenant}-only.pdf" in out
            scanner.scan(tenant, (), "cli empty-scope error", out)

        # 2) in-process: the store, the engine (sync, async), the retrievers
        llm = QwenVL(api_base=server.url, model=MODEL, api_key="x")
        with EdgePageStore(
            store_path, encoder_name=encoder.name, dim=encoder.dim, sparse=encoder.sparse
        ) as store:
            for tenant, question, groups in combos:
                scope = PageFilter(tenant=tenant, acl_groups=groups)
                query = encoder.encode_query(question)
                hits = store.search(query, limit=20, page_filter=scope)
                assert hits, (tenant, question)
                refs = [
                    PageRef(d, p)
                    for d in (
                        "report.pdf",
                        "memo.pdf",
                        "restricted.pdf",
                        "beta-only.pdf",
                        "alpha-only.pdf",
                    )
                    for p in range(1, 8)
                ]
                scanner.scan(
                    tenant,
                    groups,
                    "store",
                    {
                        "hits": [h.record.__dict__ for h in hits],
                        "pages": [r.__dict__ for r in store.get_pages(refs, scope)],
                        "docs": [s.model_dump() for s in store.list_documents(scope)],
                        "count": store.count_pages(scope),
                    },
                )
                operations += 1

                engine = DocMemoQueryEngine.from_defaults(
                    store=store,
                    encoder=encoder,
                    llm=llm,
                    config=DocMemoConfig(rounds=2, pages_per_round=2, llm_rerank=True),
                    page_filter=scope,
                )
                before = len(server.requests)
                response = engine.query(question)
                scanner.scan(
                    tenant,
                    groups,
                    f"query {question!r}",
                    {
                        "answer": str(response),
                        "nodes": node_items(response.source_nodes),
                        "meta": response.metadata,
                    },
                )
                operations += 1
                response = loop.run_until_complete(engine.aquery(question))
                scanner.scan(
                    tenant,
                    groups,
                    "aquery",
                    {
                        "answer": str(response),
                        "nodes": node_items(response.source_nodes),
                        "meta": response.metadata,
                    },
                )
                operations += 1
                nodes = engine.retrieve(QueryBundle(question)) + engine.retriever.retrieve(question)
                scanner.scan(tenant, groups, "retrieve", node_items(nodes))
                operations += 1
                scanner.scan(tenant, groups, "requests", [r.text for r in server.requests[before:]])
                own_images += scanner.scan_images(tenant, server.requests[before:])
                assert not server.problems
            for tenant in ("alpha", "beta"):  # a scope naming only the other tenant's documents
                other = "beta" if tenant == "alpha" else "alpha"
                scope = PageFilter(doc_ids=(f"{other}-only.pdf",), tenant=tenant)
                result = DocMemoQueryEngine.from_defaults(
                    store=store, encoder=encoder, page_filter=scope
                ).run("notes?")
                scanner.scan(
                    tenant,
                    (),
                    "foreign-scope query",
                    {"answer": result.answer, "trace": result.trace.model_dump(mode="json")},
                )
                assert store.get_pages([PageRef(f"{other}-only.pdf", 1)], scope) == []
    loop.close()
    assert own_images > 100, "page images reached the VLM (from any working directory)"
    assert not [r for r in caplog.records if "could not connect" in r.getMessage()]
    scanner.scan(
        "alpha", (), "log", [r.getMessage() for r in caplog.records if "BETAMARK" in r.getMessage()]
    )
    print(
        f"leak test: {operations} queries, {scanner.checked} items checked, {len(scanner.found)} leaks"
    )
    assert operations == 200
    assert scanner.found == [], "\n".join(scanner.found[:20])
