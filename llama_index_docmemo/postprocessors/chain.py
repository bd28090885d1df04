"""LlamaIndex's ``node_postprocessors=`` as DocMemo's rerank stage: one postprocessor after another."""

from __future__ import annotations

from llama_index.core.postprocessor.types import BaseNodePostprocessor
from llama_index.core.prompts.mixin import PromptMixinType
from llama_index.core.schema import NodeWithScore, QueryBundle
from pydantic import Field, SerializeAsAny


class PostprocessorChain(BaseNodePostprocessor):
    """Runs ``postprocessors`` in order on each round's candidate pages (each sees the previous
    one's nodes), as a ``RetrieverQueryEngine`` runs its ``node_postprocessors``."""

    postprocessors: list[SerializeAsAny[BaseNodePostprocessor]] = Field(default_factory=list)

    @classmethod
    def class_name(cls) -> str:
        return "PostprocessorChain"

    def _get_prompt_modules(self) -> PromptMixinType:
        return {str(i): p for i, p in enumerate(self.postprocessors)}

    def _postprocess_nodes(
        self, nodes: list[NodeWithScore], query_bundle: QueryBundle | None = None
    ) -> list[NodeWithScore]:
        for postprocessor in self.postprocessors:
            nodes = postprocessor.postprocess_nodes(nodes, query_bundle)
        return nodes

    async def _apostprocess_nodes(
        self, nodes: list[NodeWithScore], query_bundle: QueryBundle | None = None
    ) -> list[NodeWithScore]:
        for postprocessor in self.postprocessors:
            nodes = await postprocessor.apostprocess_nodes(nodes, query_bundle)
        return nodes
