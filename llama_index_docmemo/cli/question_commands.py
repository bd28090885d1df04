"""``docmemo search``, ``ask`` and ``demo``: pages and answers for a question."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from llama_index_docmemo.cli import options
from llama_index_docmemo.cli.rounds import round_line
from llama_index_docmemo.errors import DocMemoError

if TYPE_CHECKING:
    from llama_index_docmemo.evidence.citations import Citation


def register(sub: Any) -> None:
    """Add the three commands to the ``docmemo`` sub-parsers."""
    p = sub.add_parser("search", help="top pages for a query (one round, nothing read)")
    p.add_argument("query")
    options.add_store_args(p)
    options.add_scope_args(p)
    p.add_argument("-k", type=int, default=5)
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_search)

    p = sub.add_parser("ask", help="answer a question with the DocMemo loop")
    p.add_argument("question")
    options.add_store_args(p)
    options.add_scope_args(p)
    options.add_llm_args(p)
    options.add_loop_args(p)
    p.add_argument("--json", action="store_true")
    p.add_argument("--trace", type=Path, help="write the belief heat-map (.png or .html)")
    p.add_argument(
        "--html",
        type=Path,
        help="write the answer with its citations and the cited pages, boxes drawn (.html)",
    )
    p.set_defaults(func=cmd_ask)

    p = sub.add_parser("demo", help="index a generated report and answer questions about it")
    p.add_argument("--cache-dir", type=Path, default=None)
    options.add_llm_args(p)
    p.set_defaults(func=cmd_demo)


def cmd_search(args: argparse.Namespace) -> int:
    requested = options.encoder(args)
    with options.store(args, requested) as store:
        encoder = options.store_encoder(store, requested)
        hits = store.search(
            encoder.encode_query(args.query), limit=args.k, page_filter=options.page_filter(args)
        )
    rows = [
        {"doc_id": h.record.doc_id, "page": h.record.page, "score": round(h.score, 6)} for h in hits
    ]
    if args.json:
        print(json.dumps(rows))
    else:
        for row, hit in zip(rows, hits, strict=True):
            snippet = " ".join(hit.record.text.split())[:100]
            print(f"{row['score']:.4f}  {row['doc_id']} p.{row['page']}  {snippet}")
    return 0


def cmd_ask(args: argparse.Namespace) -> int:
    from llama_index_docmemo.query_engine import DocMemoQueryEngine
    from llama_index_docmemo.store.scope import PageFilter

    requested = options.encoder(args)
    with options.store(args, requested) as store:
        encoder = options.store_encoder(store, requested)
        scope = options.page_filter(args)
        if store.count_pages(scope) == 0:
            # only documents this caller may see are named (never another tenant's)
            visible = store.list_documents(
                PageFilter(tenant=scope.tenant, acl_groups=scope.acl_groups)
            )
            raise DocMemoError(
                f"no pages visible in {args.url or options.store_path(args)} for this "
                f"scope (--doc {args.doc}, --tenant {args.tenant}, --acl-group {args.acl_group}); "
                f"documents you may read there: {', '.join(d.doc_id for d in visible) or 'none'}"
            )
        engine = DocMemoQueryEngine.from_defaults(
            store=store,
            encoder=encoder,
            llm=options.llm_from_args(args),
            config=options.config(args).updated(ocr_boxes=bool(args.html)),
            page_filter=scope,
            images=options.images(args),
        )
        result = engine.run(args.question)
    trace = result.trace
    if args.html:
        from llama_index_docmemo.evidence.html import write_answer_html

        write_answer_html(args.html, result)
    code = 1 if trace.stop_reason == "llm_error" else 0  # a partial result: said, and non-zero
    if args.trace:
        from llama_index_docmemo.visualize import render_trace

        render_trace(trace, args.trace)
    if code:
        print(f"docmemo: the LLM failed, the result is partial: {trace.error}", file=sys.stderr)
    if args.json:
        print(
            json.dumps(
                {
                    "answer": result.answer,
                    "evidence": [e.model_dump() for e in trace.evidence],
                    "citations": [citation_json(c) for c in trace.citations],
                    "abstained": trace.abstained,
                    "rounds": len(trace.rounds),
                    "stop_reason": trace.stop_reason,
                    "error": trace.error,
                    "pages_read": [p.model_dump() for p in trace.pages_read],
                    "reader": trace.reader,
                    "images": trace.images,
                }
            )
        )
        return code
    label = {"answered": "Answer", "unanswerable": "Answer"}.get(result.status, "Best guess")
    print(f"{label}: {result.answer}")
    if trace.reader == "offline":
        print(
            "Reader: offline, no LLM configured (it labels pages from their text and rarely "
            "answers exactly): pass --llm-url URL --llm-model NAME, or set DOCMEMO_LLM_URL"
        )
    print(
        f"Status: {result.status} (stop: {trace.stop_reason}, rounds: {len(trace.rounds)}, "
        f"reader: {trace.reader}{', page images' if trace.images else ''}, "
        f"{trace.seconds:.2f}s)"
    )
    print(
        "Evidence: "
        + (", ".join(f"{e.doc_id} p.{e.page} ({e.score:.2f})" for e in trace.evidence) or "none")
    )
    for rnd in trace.rounds:
        print(round_line(rnd))
    for citation in trace.citations:
        if citation.how == "computed":
            print(
                f"  cites {citation.text!r}: computed from the cited figures ({citation.computed})"
            )
            continue
        where = f"{citation.doc_id} p.{citation.page}" if citation.verified else "no page read"
        box = f" box {[round(v) for v in citation.bbox]}" if citation.bbox else ""
        check = "verified" if citation.verified else "NOT verified"
        print(f"  cites {citation.text!r}: {where}{box}, {check} ({citation.how})")
    if args.trace:
        print(f"Trace written to {args.trace}")
    if args.html:
        print(f"Answer page written to {args.html}")
    return code


CITATION_KEYS = (
    "text",
    "doc_id",
    "page",
    "bbox",
    "quote",
    "verified",
    "how",
    "kind",
    "box_from",
    "computed",
)


def citation_json(citation: Citation) -> dict[str, Any]:
    """A citation as ``ask --json`` prints it (the keys of ``CITATION_KEYS``)."""
    return citation.model_dump(mode="json", include=set(CITATION_KEYS))


def cmd_demo(args: argparse.Namespace) -> int:
    from llama_index_docmemo.demo.run import run_demo

    results = run_demo(cache_dir=args.cache_dir, llm=options.llm_from_args(args))
    return 0 if results else 1
