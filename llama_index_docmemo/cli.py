"""The ``docmemo`` command: index, list and delete documents, search pages, ask questions, demo,
eval and compare (the last two from the evaluation harness, extra ``eval``)."""

from __future__ import annotations

import argparse
import functools
import json
import logging
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from llama_index_docmemo.errors import DocMemoError

if TYPE_CHECKING:
    from llama_index_docmemo.distributed import RayExecutor

DEFAULT_STORE = Path(os.environ.get("DOCMEMO_STORE", "./docmemo_store"))


def _add_store_args(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("page store")
    group.add_argument(
        "--store",
        type=Path,
        default=None,
        help=f"folder of the embedded store (Qdrant Edge); default $DOCMEMO_STORE or {DEFAULT_STORE}",
    )
    group.add_argument(
        "--url", default=os.environ.get("DOCMEMO_QDRANT_URL"), help="Qdrant server URL"
    )
    group.add_argument("--api-key", default=os.environ.get("DOCMEMO_QDRANT_API_KEY"))
    group.add_argument("--collection", default="docmemo_pages")
    group.add_argument("--encoder", default=None, help="encoder name (default: the CPU default)")


def add_llm_args(parser: argparse.ArgumentParser) -> None:
    """The LLM reader's options (``ask``, ``index``, ``demo``, ``compare``)."""
    group = parser.add_argument_group("LLM reader on an OpenAI-compatible server (optional)")
    group.add_argument(
        "--llm-url",
        default=os.environ.get("DOCMEMO_LLM_URL"),
        help="OpenAI-compatible base URL (vLLM, llama.cpp, Ollama, OpenAI; e.g. http://127.0.0.1:8000/v1)",
    )
    group.add_argument("--llm-model", default=os.environ.get("DOCMEMO_LLM_MODEL"))
    group.add_argument("--llm-api-key", default=os.environ.get("DOCMEMO_LLM_API_KEY"))
    group.add_argument(
        "--llm-images",
        choices=["auto", "on", "off"],
        default="auto",
        help="show the LLM page images: auto (default: the server decides; a server that "
        "refuses images is sent text from then on), on, off (a text model; "
        "$DOCMEMO_LLM_IMAGES=0)",
    )
    group.add_argument(
        "--llm-structured-mode",
        choices=[
            "auto",
            "json_schema",
            "structured_outputs",
            "guided_json",
            "json_object",
            "prompt",
        ],
        default=None,
        help="how to ask for JSON (default auto: json_schema, then llama.cpp's json_object, then the prompt)",
    )
    group.add_argument(
        "--llm-context-window", type=int, default=None, help="the model's context, in tokens"
    )
    group.add_argument("--llm-max-tokens", type=int, default=None, help="reply tokens")


def _add_loop_args(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("DocMemo loop")
    group.add_argument("--rounds", type=int, default=None, help="maximum rounds T")
    group.add_argument("-k", "--pages-per-round", type=int, default=None)
    group.add_argument("--static", action="store_true", help="one round of plain top-k")
    group.add_argument("--sampling", choices=["thompson", "greedy"], default=None)
    group.add_argument("--seed", type=int, default=None)


def _encoder(args: argparse.Namespace) -> Any:
    from llama_index_docmemo.encoders import default_encoder, load_encoder

    return load_encoder(args.encoder) if args.encoder else default_encoder()


def _store(args: argparse.Namespace, encoder: Any, *, create: bool = False) -> Any:
    """The page store the arguments name; only ``index`` may create an embedded one."""
    from llama_index_docmemo.store import open_store

    if args.url:
        return open_store(
            url=args.url, api_key=args.api_key, collection=args.collection, encoder=encoder
        )
    path = args.store or DEFAULT_STORE
    if not create and not Path(path).exists():
        raise DocMemoError(
            f"no page store at {path}: index documents first (docmemo index PDF... --store {path})"
        )
    return open_store(path=path, encoder=encoder)


def _images(args: argparse.Namespace) -> Any:
    """``--llm-images`` as the ``images`` setting of the reader, reranker and summariser."""
    return {"auto": "auto", "on": True, "off": False}[args.llm_images]


def llm_from_args(args: argparse.Namespace) -> Any:
    """The LLM :func:`add_llm_args` options describe (None without ``--llm-url``)."""
    if not args.llm_url:
        return None
    from llama_index_docmemo.llms import QwenVL

    return QwenVL(
        api_base=args.llm_url,
        model=args.llm_model,
        api_key=args.llm_api_key,
        multimodal={"auto": None, "on": True, "off": False}[args.llm_images],
        structured_mode=args.llm_structured_mode,
        context_window=args.llm_context_window,
        max_tokens=args.llm_max_tokens,
    )


def _config(args: argparse.Namespace) -> Any:
    from llama_index_docmemo.config import DocMemoConfig

    overrides = {
        "rounds": args.rounds,
        "pages_per_round": args.pages_per_round,
        "sampling": args.sampling,
        "seed": args.seed,
    }
    return DocMemoConfig(
        static=args.static, **{k: v for k, v in overrides.items() if v is not None}
    )


def _page_filter(args: argparse.Namespace) -> Any:
    from llama_index_docmemo.types import PageFilter

    return PageFilter(
        doc_ids=tuple(args.doc) if getattr(args, "doc", None) else None,
        tenant=args.tenant,
        acl_groups=tuple(args.acl_group) if args.acl_group else None,
    )


def _add_scope_args(parser: argparse.ArgumentParser, *, docs: bool = True) -> None:
    if docs:
        parser.add_argument(
            "--doc",
            action="append",
            help="restrict to this document (its id: the path relative to the folder indexed, "
            "e.g. 2023/10k.pdf); repeatable",
        )
    parser.add_argument(
        "--tenant", default=None, help="caller's tenant (none: documents indexed without one)"
    )
    parser.add_argument(
        "--acl-group",
        action="append",
        help="caller's access group; repeatable (none: documents without an ACL only)",
    )


# -- commands -----------------------------------------------------------------------------------
def cmd_index(args: argparse.Namespace) -> int:
    from llama_index_docmemo.indexing import DocumentIndexer

    executor = _index_executor(args)  # before any work: bad flags, Ray missing
    encoder = _encoder(args)
    summarizer = None
    llm = llm_from_args(args)
    if llm is not None:
        from llama_index_docmemo.ingest.summaries import VLMPageSummarizer

        summarizer = VLMPageSummarizer(llm, images=_images(args))
    if args.id is not None and len(args.paths) != 1:
        raise DocMemoError("--id names one document: give exactly one PDF file with it")
    with _store(args, encoder, create=True) as store:
        indexer = DocumentIndexer(
            store, encoder, ocr=args.ocr, summarizer=summarizer, batch_size=args.batch_size
        )
        if args.id is not None:
            report = indexer.index_file(
                args.paths[0], doc_id=args.id, tenant=args.tenant, acl=args.acl or None
            )
        else:
            report = indexer.index_paths(
                args.paths,
                tenant=args.tenant,
                acl=args.acl or None,
                root=args.root,
                progress=not args.quiet,
                executor=executor,
            )
        if args.layout != "none":
            report.warnings += _index_layouts(report.indexed, args.layout)
    print(report.summary())
    return 1 if report.failed else 0


def _index_executor(args: argparse.Namespace) -> RayExecutor | None:
    """The Ray executor ``--ray`` asks for (None: this process); Ray is imported only then."""
    if args.ray is None:
        if args.workers is not None or args.gpus_per_worker:
            raise DocMemoError("--workers and --gpus-per-worker need --ray")
        return None
    if args.id is not None:
        raise DocMemoError("--ray indexes folders and lists of files; --id names one file")
    from llama_index_docmemo.distributed import RayExecutor
    from llama_index_docmemo.encoders import load_encoder

    return RayExecutor(
        args.ray,
        workers=args.workers,
        gpus_per_worker=args.gpus_per_worker,
        encoder=functools.partial(load_encoder, args.encoder) if args.encoder else None,
    )


def _index_layouts(sources: list[str], method: str) -> list[str]:
    """Compute and cache table/figure layout for newly indexed files (crops at query time).

    A file whose layout cannot be computed is a warning (crops refine answers, they are not
    needed to find pages); returns those warnings.
    """
    from llama_index_docmemo.ingest.layout.mineru_cli import index_layout
    from llama_index_docmemo.ingest.pdf import RENDER_ERRORS, file_sha256
    from llama_index_docmemo.postprocessors.crops import CropPostprocessor

    cache = CropPostprocessor().layout_cache
    warnings: list[str] = []
    for source in sources:
        try:
            blocks = index_layout(source, file_sha256(source), cache, method=method)
        except (DocMemoError, OSError, *RENDER_ERRORS) as exc:
            warnings.append(f"layout ({method}) of {source} skipped: {exc}")
            continue
        n = sum(len(b) for b in blocks.values())
        print(f"layout ({method}): {source}: {n} blocks on {len(blocks)} pages")
    return warnings


def cmd_list(args: argparse.Namespace) -> int:
    """The documents the caller (tenant, groups) may see, one per line or as JSON."""
    encoder = _encoder(args)
    with _store(args, encoder) as store:
        schemas = store.list_documents(_page_filter(args))
    rows = [
        {
            "doc": s.doc_id,
            "pages": s.n_pages,
            "version": s.doc_version[:12],
            "tenant": s.tenant,
            "acl": s.acl,
            "source": s.source,
        }
        for s in schemas
    ]
    if args.json:
        print(json.dumps(rows))
    else:
        for row in rows:
            acl = ",".join(row["acl"]) or "-"
            print(f"{row['doc']}\t{row['pages']} pages\tacl {acl}\t{row['source']}")
        print(f"{len(rows)} documents")
    return 0


def cmd_delete(args: argparse.Namespace) -> int:
    """Delete documents of one tenant by id; a missing one is an error (exit 1), the rest go."""
    encoder = _encoder(args)
    missing: list[str] = []
    with _store(args, encoder) as store:
        for doc_id in args.docs:
            if store.delete_document(doc_id, tenant=args.tenant):
                print(f"deleted {doc_id}")
            else:
                missing.append(doc_id)
    where = f"tenant {args.tenant!r}" if args.tenant is not None else "no tenant"
    for doc_id in missing:
        print(f"docmemo: no document {doc_id!r} ({where}); see docmemo list", file=sys.stderr)
    return 1 if missing else 0


def cmd_search(args: argparse.Namespace) -> int:
    encoder = _encoder(args)
    with _store(args, encoder) as store:
        hits = store.search(
            encoder.encode_query(args.query), limit=args.k, page_filter=_page_filter(args)
        )
    rows = [
        {"doc": h.record.doc_id, "page": h.record.page, "score": round(h.score, 6)} for h in hits
    ]
    if args.json:
        print(json.dumps(rows))
    else:
        for row, hit in zip(rows, hits, strict=True):
            snippet = " ".join(hit.record.text.split())[:100]
            print(f"{row['score']:.4f}  {row['doc']} p.{row['page']}  {snippet}")
    return 0


def cmd_ask(args: argparse.Namespace) -> int:
    from llama_index_docmemo.query_engine import DocMemoQueryEngine
    from llama_index_docmemo.types import PageFilter

    encoder = _encoder(args)
    with _store(args, encoder) as store:
        scope = _page_filter(args)
        if store.count_pages(scope) == 0:
            # only documents this caller may see are named (never another tenant's)
            visible = store.list_documents(
                PageFilter(tenant=scope.tenant, acl_groups=scope.acl_groups)
            )
            raise DocMemoError(
                f"no pages visible in {args.url or args.store or DEFAULT_STORE} for this scope "
                f"(--doc {args.doc}, --tenant {args.tenant}, --acl-group {args.acl_group}); "
                f"documents you may read there: {', '.join(d.doc_id for d in visible) or 'none'}"
            )
        engine = DocMemoQueryEngine.from_defaults(
            store=store,
            encoder=encoder,
            llm=llm_from_args(args),
            config=_config(args),
            page_filter=scope,
            images=_images(args),
        )
        result = engine.run(args.question)
    trace = result.trace
    if args.trace:
        from llama_index_docmemo.visualize import render_trace

        render_trace(trace, args.trace)
    if args.json:
        print(
            json.dumps(
                {
                    "answer": result.answer,
                    "evidence": [e.model_dump() for e in trace.evidence],
                    "rounds": len(trace.rounds),
                    "stop_reason": trace.stop_reason,
                    "pages_read": [p.model_dump() for p in trace.pages_read],
                    "reader": trace.reader,
                    "images": trace.images,
                }
            )
        )
        return 0
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
        + (", ".join(f"{e.doc} p.{e.page} ({e.score:.2f})" for e in trace.evidence) or "none")
    )
    for rnd in trace.rounds:
        pages = ", ".join(f"p.{s.page}" for s in rnd.selected)
        verdict = rnd.feedback.status if rnd.feedback else "no feedback"
        useful = ", ".join(f"p.{u.page}" for u in rnd.feedback.useful) if rnd.feedback else ""
        print(
            f"  round {rnd.round}: query={rnd.query!r} read [{pages}] -> {verdict}; useful [{useful}]"
        )
    if args.trace:
        print(f"Trace written to {args.trace}")
    return 0


def cmd_demo(args: argparse.Namespace) -> int:
    from llama_index_docmemo.demo.run import run_demo

    results = run_demo(cache_dir=args.cache_dir, llm=llm_from_args(args))
    return 0 if results else 1


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="docmemo",
        description="DocMemo: question answering over long PDFs with memory-guided retrieval.",
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="log progress details")
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("index", help="index PDFs (files or folders) into the page store")
    p.add_argument("paths", nargs="+", type=Path)
    _add_store_args(p)
    add_llm_args(p)
    p.add_argument("--tenant", default=None, help="owner of these documents (a separate space)")
    p.add_argument(
        "--acl",
        action="append",
        help="access group allowed to read; repeatable (none: every caller of the tenant)",
    )
    p.add_argument(
        "--root",
        type=Path,
        default=None,
        help="doc ids are paths relative to this folder (default: each folder given; for files "
        "given one by one, their common folder)",
    )
    p.add_argument("--id", default=None, help="explicit doc id for a single PDF file")
    p.add_argument("--ocr", choices=["auto", "on", "off"], default="auto")
    p.add_argument(
        "--layout",
        choices=["none", "pymupdf", "mineru"],
        default="none",
        help="store table/figure layout blocks (mineru needs the 'mineru' extra)",
    )
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.add_argument("--batch-size", type=int, default=32, help="pages per encoder call (default 32)")
    group = p.add_argument_group("Ray cluster (extra 'ray')")
    group.add_argument(
        "--ray",
        nargs="?",
        const="auto",
        default=None,
        metavar="auto|ADDRESS",
        help="index on a Ray cluster: auto ($RAY_ADDRESS or the cluster running here, else a "
        "new local one) or its address (ray://head:10001)",
    )
    group.add_argument(
        "--workers",
        type=int,
        default=None,
        help="encoder workers (default: one per --gpus-per-worker GPUs of the cluster, else 1)",
    )
    group.add_argument(
        "--gpus-per-worker", type=float, default=0.0, help="GPUs each encoder worker reserves"
    )
    p.set_defaults(func=cmd_index)

    p = sub.add_parser("list", help="documents in the store (of one tenant, visible to groups)")
    _add_store_args(p)
    _add_scope_args(p, docs=False)
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_list)

    p = sub.add_parser("delete", help="delete documents (of one tenant) and all their pages")
    p.add_argument("docs", nargs="+", metavar="DOC", help="doc id as shown by docmemo list")
    _add_store_args(p)
    p.add_argument("--tenant", default=None, help="the documents' tenant (none: untenanted)")
    p.set_defaults(func=cmd_delete)

    p = sub.add_parser("search", help="top pages for a query (one round, no reasoning)")
    p.add_argument("query")
    _add_store_args(p)
    _add_scope_args(p)
    p.add_argument("-k", type=int, default=5)
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_search)

    p = sub.add_parser("ask", help="answer a question with the DocMemo loop")
    p.add_argument("question")
    _add_store_args(p)
    _add_scope_args(p)
    add_llm_args(p)
    _add_loop_args(p)
    p.add_argument("--json", action="store_true")
    p.add_argument("--trace", type=Path, help="write the belief heat-map (.png or .html)")
    p.set_defaults(func=cmd_ask)

    p = sub.add_parser("demo", help="index a generated report and answer questions about it")
    p.add_argument("--cache-dir", type=Path, default=None)
    add_llm_args(p)
    p.set_defaults(func=cmd_demo)

    _add_harness_command(
        sub, "eval", "compare engines on a dataset folder (qa.jsonl + pdfs/); extra 'eval'"
    )
    _add_harness_command(
        sub,
        "compare",
        "DocMemo vs the stock LlamaIndex engine on your PDFs and questions; extra 'eval'",
    )
    return parser


def _add_harness_command(sub: Any, name: str, help: str) -> None:
    """``eval`` and ``compare`` belong to the evaluation harness (extra ``eval``): their own
    parser is built only when they run, so no other command imports the harness. This stub
    treats nothing as an option and hands every following argument over."""
    p = sub.add_parser(name, help=help, add_help=False, prefix_chars="\0")
    p.add_argument("arguments", nargs=argparse.REMAINDER)
    p.set_defaults(func=lambda args: _run_harness(name, args.arguments))


def _run_harness(name: str, arguments: list[str]) -> int:
    from llama_index_docmemo.evaluation.cli import main as harness_main

    return harness_main(name, arguments)


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(
        level=logging.INFO if args.verbose else logging.WARNING,
        format="%(levelname)s %(name)s: %(message)s",
    )
    try:
        return int(args.func(args) or 0)
    except (DocMemoError, ValueError) as exc:  # bad input or settings: a message, not a traceback
        if args.verbose:
            raise
        print(f"docmemo: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
