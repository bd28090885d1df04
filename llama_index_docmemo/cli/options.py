"""The options several commands share, and the objects they describe (store, encoder, LLM,
loop settings, caller scope). Heavy modules are imported only when a command builds them."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from pydantic_settings import BaseSettings, SettingsConfigDict

from llama_index_docmemo.errors import DocMemoError
from llama_index_docmemo.llms.environment import llm_environment


class QdrantEnvironment(BaseSettings):
    """``$DOCMEMO_QDRANT_URL`` / ``$DOCMEMO_QDRANT_API_KEY``: the defaults of ``--url`` and
    ``--api-key``."""

    model_config = SettingsConfigDict(
        env_prefix="DOCMEMO_QDRANT_", env_ignore_empty=True, extra="ignore"
    )

    url: str | None = None
    api_key: str | None = None


def add_store_args(parser: argparse.ArgumentParser) -> None:
    from llama_index_docmemo.paths import default_store_dir

    qdrant = QdrantEnvironment()
    group = parser.add_argument_group("page store")
    group.add_argument(
        "--store",
        type=Path,
        default=None,
        help="folder of the embedded store (Qdrant Edge); default $DOCMEMO_STORE_DIR or "
        f"{default_store_dir()} (docmemo where)",
    )
    group.add_argument("--url", default=qdrant.url, help="Qdrant server URL ($DOCMEMO_QDRANT_URL)")
    group.add_argument("--api-key", default=qdrant.api_key)
    group.add_argument("--collection", default="docmemo_pages")
    group.add_argument(
        "--encoder",
        default=None,
        help="encoder name (default: the one the store records; the CPU default for a new store)",
    )


def add_llm_args(parser: argparse.ArgumentParser) -> None:
    """The LLM reader's options (``ask``, ``index``, ``demo``, ``compare``)."""
    env = llm_environment()
    group = parser.add_argument_group("LLM reader on an OpenAI-compatible server (optional)")
    group.add_argument(
        "--llm-url",
        default=env.url,
        help="OpenAI-compatible base URL (vLLM, llama.cpp, Ollama, OpenAI; e.g. http://127.0.0.1:8000/v1)",
    )
    group.add_argument("--llm-model", default=env.model)
    group.add_argument("--llm-api-key", default=env.api_key)
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


def add_loop_args(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("DocMemo loop")
    group.add_argument("--rounds", type=int, default=None, help="maximum rounds T")
    group.add_argument("-k", "--pages-per-round", type=int, default=None)
    group.add_argument("--static", action="store_true", help="one round of plain top-k")
    group.add_argument("--sampling", choices=["thompson", "greedy"], default=None)
    group.add_argument("--seed", type=int, default=None)


def add_scope_args(parser: argparse.ArgumentParser, *, docs: bool = True) -> None:
    """Who is asking (tenant, access groups) and, with ``docs``, which documents."""
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


def encoder(args: argparse.Namespace) -> Any:
    """The ``--encoder`` asked for, or None: the store's own (see :func:`store_encoder`)."""
    from llama_index_docmemo.encoders import load_encoder

    return load_encoder(args.encoder) if args.encoder else None


def store_encoder(page_store: Any, page_encoder: Any) -> Any:
    """``page_encoder``, else the encoder ``page_store`` records."""
    from llama_index_docmemo.encoders import load_encoder

    return page_encoder or load_encoder(page_store.encoder_name, page_store.encoder_settings)


def store(args: argparse.Namespace, page_encoder: Any, *, create: bool = False) -> Any:
    """The page store the arguments name; only ``index`` may create an embedded one."""
    from llama_index_docmemo.store import open_store

    if args.url:
        return open_store(
            url=args.url, api_key=args.api_key, collection=args.collection, encoder=page_encoder
        )
    path = store_path(args)
    if not create and not Path(path).exists():
        old = Path("docmemo_store")  # the default before 0.2.0
        hint = (
            f"; the store in {old} (the default before 0.2.0): --store {old}"
            if old.is_dir()
            else ""
        )
        raise DocMemoError(
            f"no page store at {path}: index documents first (docmemo index PDF... --store {path})"
            + hint
        )
    return open_store(path=path, encoder=page_encoder)


def store_path(args: argparse.Namespace) -> Path:
    """The embedded store's folder: ``--store``, else the default one (``docmemo where``)."""
    from llama_index_docmemo.paths import default_store_dir

    return args.store or default_store_dir()


def metadata(pairs: list[str] | None) -> dict[str, Any]:
    """``--meta key=value`` pairs: values that read as JSON (2023, true, ["a"]) keep their
    type, any other is a string."""
    import json

    found: dict[str, Any] = {}
    for pair in pairs or ():
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise DocMemoError(f"--meta {pair!r}: expected KEY=VALUE")
        try:
            found[key.strip()] = json.loads(value)
        except ValueError:
            found[key.strip()] = value
    return found


def images(args: argparse.Namespace) -> Any:
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


def config(args: argparse.Namespace) -> Any:
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


def page_filter(args: argparse.Namespace) -> Any:
    """The caller of ``--tenant`` / ``--acl-group`` (checked: no reserved or control-character
    names), scoped to ``--doc``."""
    from llama_index_docmemo.store.scope import PageFilter, caller

    return caller(
        PageFilter(
            doc_ids=tuple(args.doc) if getattr(args, "doc", None) else None,
            tenant=args.tenant,
            acl_groups=tuple(args.acl_group) if args.acl_group else None,
        )
    )
