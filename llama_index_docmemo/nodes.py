"""Pages as LlamaIndex nodes: one node type for a page (text, and its image once rendered).

``Node(text_resource=..., image_resource=...)`` carries both page text and page image, which
``ImageNode`` does not. Metadata holds the app's own keys (its Documents' metadata), this
package's keys (``doc_id``, ``page``, ``kind``...) and the keys LlamaIndex readers and apps use
(``file_name``, ``file_path``, ``page_label``); the package's win over an app key of the same
name. Crops (:mod:`.postprocessors.crops`) copy their page's metadata and relationship.
"""

from __future__ import annotations

from pathlib import Path

from llama_index.core.schema import (
    BaseNode,
    MediaResource,
    Node,
    NodeRelationship,
    NodeWithScore,
    RelatedNodeInfo,
)

from llama_index_docmemo.store.points import file_name
from llama_index_docmemo.types import PageRecord, PageRef

_HIDDEN = ["doc_version", "source", "kind", "file_path", "summary"]


def page_node(record: PageRecord, *, image_path: Path | None = None, summary: str = "") -> Node:
    """A page as a node: its text, optionally its rendered image, and citation metadata
    (``file_name`` the file's name, ``file_path`` its absolute path, ``doc_id`` and
    ``ref_doc_id`` the document id, ``page_label`` the 1-based page number) beside the app's
    own keys."""
    source = record.source
    metadata = {
        **record.metadata,
        "kind": "page",
        "doc_id": record.doc_id,
        "page": record.page,
        "doc_version": record.doc_version,
        "source": source,
        "section": record.section,
        "file_name": file_name(source, record.doc_id),  # what the store filters on
        "file_path": source,
        "page_label": str(record.page),
    }
    if summary:
        metadata["summary"] = summary
    return Node(
        id_=f"{record.doc_id}#p{record.page}@{record.doc_version[:16]}",
        text_resource=MediaResource(text=record.text),
        image_resource=MediaResource(path=image_path) if image_path is not None else None,
        metadata=metadata,
        # ``node.ref_doc_id`` is the document id, as ``DocMemoIndex.delete_ref_doc`` takes it
        relationships={NodeRelationship.SOURCE: RelatedNodeInfo(node_id=record.doc_id)},
        excluded_embed_metadata_keys=list(_HIDDEN),
        excluded_llm_metadata_keys=list(_HIDDEN),
    )


class PageWithScore(NodeWithScore):
    """``NodeWithScore`` whose ``text`` also works for a ``Node`` (core's checks ``TextNode``
    only, which breaks evaluators such as ``RetrieverEvaluator`` on the newer node type)."""

    @property
    def text(self) -> str:
        return self.node.get_content()


def scored(record: PageRecord, score: float | None, **kwargs: object) -> PageWithScore:
    """A page node with its score, as every path of the loop returns pages."""
    return PageWithScore(node=page_node(record, **kwargs), score=score)  # type: ignore[arg-type]


def node_ref(node: BaseNode | NodeWithScore) -> PageRef:
    """The page a page or crop node belongs to."""
    meta = node.node.metadata if isinstance(node, NodeWithScore) else node.metadata
    return PageRef(str(meta["doc_id"]), int(meta["page"]))


def is_page(node: NodeWithScore) -> bool:
    return node.node.metadata.get("kind") == "page"
