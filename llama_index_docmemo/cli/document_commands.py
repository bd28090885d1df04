"""``docmemo index``, ``list`` and ``delete``: the documents of a page store."""

from __future__ import annotations

import argparse
import functools
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from llama_index_docmemo.cli import options
from llama_index_docmemo.errors import DocMemoError

if TYPE_CHECKING:
    from llama_index_docmemo.distributed import RayExecutor

EXIT_SOME_FAILED = 1
"""``docmemo index``: some files failed (listed), every other one is indexed."""
EXIT_NOTHING_INDEXED = 3
"""``docmemo index``: every file failed, nothing was indexed (2 is bad input or settings)."""


def register(sub: Any) -> None:
    """Add the three commands to the ``docmemo`` sub-parsers."""
    p = sub.add_parser("index", help="index PDFs (files or folders) into the page store")
    p.add_argument("paths", nargs="+", type=Path)
    options.add_store_args(p)
    options.add_llm_args(p)
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
    p.add_argument(
        "--meta",
        action="append",
        metavar="KEY=VALUE",
        help="metadata stored with every page, shown on nodes and filterable "
        "(MetadataFilter(key=KEY, ...)); JSON values keep their type (year=2023); repeatable",
    )
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

    p = sub.add_parser(
        "where", help="where the page stores and caches are by default (DocMemoIndex, docmemo)"
    )
    p.set_defaults(func=cmd_where)

    p = sub.add_parser("list", help="documents in the store (of one tenant, visible to groups)")
    options.add_store_args(p)
    options.add_scope_args(p, docs=False)
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_list)

    p = sub.add_parser("delete", help="delete documents (of one tenant) and all their pages")
    p.add_argument("docs", nargs="+", metavar="DOC", help="doc id as shown by docmemo list")
    options.add_store_args(p)
    p.add_argument("--tenant", default=None, help="the documents' tenant (none: untenanted)")
    p.set_defaults(func=cmd_delete)


def cmd_index(args: argparse.Namespace) -> int:
    from llama_index_docmemo.indexing import DocumentIndexer

    executor = index_executor(args)  # before any work: bad flags, Ray missing
    metadata = options.metadata(args.meta)
    requested = options.encoder(args)
    summarizer = None
    llm = options.llm_from_args(args)
    if llm is not None:
        from llama_index_docmemo.ingest.summaries import VLMPageSummarizer

        summarizer = VLMPageSummarizer(llm, images=options.images(args))
    if args.id is not None and len(args.paths) != 1:
        raise DocMemoError("--id names one document: give exactly one PDF file with it")
    with options.store(args, requested, create=True) as store:
        encoder = options.store_encoder(store, requested)
        indexer = DocumentIndexer(
            store, encoder, ocr=args.ocr, summarizer=summarizer, batch_size=args.batch_size
        )
        if args.id is not None:
            report = indexer.index_file(
                args.paths[0],
                doc_id=args.id,
                tenant=args.tenant,
                acl=args.acl or None,
                metadata=metadata,
            )
        else:
            report = indexer.index_paths(
                args.paths,
                tenant=args.tenant,
                acl=args.acl or None,
                root=args.root,
                progress=not args.quiet,
                executor=executor,
                metadata=metadata,
            )
        if args.layout != "none":
            report.warnings += index_layouts(report.indexed, args.layout)
    print(report.summary())
    if report.nothing_worked:
        return EXIT_NOTHING_INDEXED
    return EXIT_SOME_FAILED if report.failed else 0


def index_executor(args: argparse.Namespace) -> RayExecutor | None:
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


def index_layouts(sources: list[str], method: str) -> list[str]:
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


def cmd_where(args: argparse.Namespace) -> int:
    """The default folders: of the store (``DocMemoIndex.from_documents(store=None)`` and
    ``--store``) and of rendered pages and crops."""
    from llama_index_docmemo.paths import default_cache_dir, default_store_dir

    print(
        "store (DocMemoIndex store=None, docmemo --store; $DOCMEMO_STORE_DIR): "
        f"{default_store_dir().absolute()}"
    )
    print(f"cache of page images and crops ($DOCMEMO_CACHE_DIR): {default_cache_dir()}")
    return 0


def cmd_list(args: argparse.Namespace) -> int:
    """The documents the caller (tenant, groups) may see, one per line or as JSON."""
    with options.store(args, options.encoder(args)) as store:
        schemas = store.list_documents(options.page_filter(args))
    rows = [
        {
            "doc_id": s.doc_id,
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
            print(f"{row['doc_id']}\t{row['pages']} pages\tacl {acl}\t{row['source']}")
        print(f"{len(rows)} documents")
    return 0


def cmd_delete(args: argparse.Namespace) -> int:
    """Delete documents of one tenant by id; a missing one is an error (exit 1), the rest go."""
    missing: list[str] = []
    with options.store(args, options.encoder(args)) as store:
        for doc_id in args.docs:
            if store.delete_document(doc_id, tenant=args.tenant):
                print(f"deleted {doc_id}")
            else:
                missing.append(doc_id)
    where = f"tenant {args.tenant!r}" if args.tenant is not None else "no tenant"
    for doc_id in missing:
        print(f"docmemo: no document {doc_id!r} ({where}); see docmemo list", file=sys.stderr)
    return 1 if missing else 0
