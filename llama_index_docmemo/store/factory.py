"""Open the page store a path or URL points to, for a given encoder."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from llama_index_docmemo.encoders.base import PageEncoder
from llama_index_docmemo.errors import NoStoreError, StoreError
from llama_index_docmemo.store.base import PageStore
from llama_index_docmemo.store.layouts import DEFAULT_LAYOUT, PAGE_IMAGE_LAYOUT, MultivectorLayout
from llama_index_docmemo.store.operations import Fusion, IdfScope

Backend = Literal["edge", "client"]


def open_store(
    path: str | Path | None = None,
    url: str | None = None,
    *,
    encoder: PageEncoder | None = None,
    backend: Backend | None = None,
    api_key: str | None = None,
    collection: str = "docmemo_pages",
    fusion: Fusion = "rrf",
    idf_scope: IdfScope = "filter",
    layout: MultivectorLayout | None = None,
    **client_options: Any,
) -> PageStore:
    """The store for ``encoder``: Qdrant Edge on ``path`` by default, a Qdrant server for ``url``.

    Args:
        path: folder of an embedded store (Qdrant Edge; ``backend="client"`` opens
            qdrant-client's local mode there instead).
        url / api_key / collection: a Qdrant server or cluster.
        encoder: the encoder that fills the store; None: the one an existing store records
            (rebuild it with :meth:`DocMemoIndex.from_store` or ``load_encoder(store.encoder_name,
            store.encoder_settings)``), the default CPU encoder for a new store.
        layout: the multivector layout (:mod:`.layouts`); None: the stored one for an existing
            store; a new one gets :data:`~.layouts.PAGE_IMAGE_LAYOUT` for a page-image encoder
            (ColQwen) and :data:`~.layouts.DEFAULT_LAYOUT` for a text encoder.
        client_options: passed to :class:`QdrantClientPageStore` (``shard_number``,
            ``replication_factor``, ``write_consistency_factor``, ``tenant_shard_keys``,
            ``quantization_config``, ``timeout``, ``retries``).

    Raises:
        StoreError: neither or both of ``path`` and ``url``, or options the backend lacks.
    """
    if (path is None) == (url is None):
        raise StoreError("open_store needs exactly one of path= (embedded store) or url= (server)")
    if encoder is None:
        try:
            return _open(
                path,
                url,
                None,
                backend,
                api_key,
                collection,
                fusion,
                idf_scope,
                layout,
                client_options,
            )
        except NoStoreError:
            from llama_index_docmemo.encoders import default_encoder

            encoder = default_encoder()
    return _open(
        path, url, encoder, backend, api_key, collection, fusion, idf_scope, layout, client_options
    )


def _open(
    path: str | Path | None,
    url: str | None,
    encoder: PageEncoder | None,
    backend: Backend | None,
    api_key: str | None,
    collection: str,
    fusion: Fusion,
    idf_scope: IdfScope,
    layout: MultivectorLayout | None,
    client_options: dict[str, Any],
) -> PageStore:
    chosen = backend or ("client" if url is not None else "edge")
    common: dict[str, Any] = {"fusion": fusion, "idf_scope": idf_scope, "layout": layout}
    if encoder is not None:
        common |= {
            "encoder_name": encoder.name,
            "dim": encoder.dim,
            "sparse": encoder.sparse,
            "encoder_settings": encoder.settings(),
            "default_layout": PAGE_IMAGE_LAYOUT if encoder.modality == "image" else DEFAULT_LAYOUT,
        }
    if chosen == "edge":
        from llama_index_docmemo.store.edge import EdgePageStore

        if url is not None:
            raise StoreError(f"backend='edge' is embedded and cannot open the URL {url}")
        if client_options or api_key is not None:
            names = ", ".join(sorted([*client_options, *(["api_key"] if api_key else [])]))
            raise StoreError(f"options for a Qdrant server ({names}) do not apply to an Edge store")
        return EdgePageStore(path, **common)  # type: ignore[arg-type]
    if chosen == "client":
        from llama_index_docmemo.store.client import QdrantClientPageStore

        return QdrantClientPageStore(
            url=url, api_key=api_key, path=path, collection=collection, **common, **client_options
        )
    raise StoreError(f"backend={backend!r} is not one of edge, client")
