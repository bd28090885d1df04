"""Schema memory as a retrieval field (pure): rank pages by their section titles and summaries.

A page's body text may never repeat the words of the question while its section heading
("Item 7. Management's Discussion", "Employee benefits") or its summary does. Scoring the
question against that short field with BM25 gives a ranking the page-text search cannot, from
data the schema memory already holds (no store call).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Mapping
from functools import lru_cache

from llama_index_docmemo.encoders.lexical import Bm25Lexical
from llama_index_docmemo.memory.schema import DocumentSchema
from llama_index_docmemo.types import PageRef


def page_fields(schema: DocumentSchema) -> dict[int, str]:
    """Page -> "section path. summary" for every page of the document that has either."""
    fields: dict[int, str] = {}
    for page in range(1, schema.n_pages + 1):
        text = " ".join(x for x in (schema.section_of(page), schema.summary_of(page)) if x)
        if text:
            fields[page] = text
    return fields


@lru_cache(maxsize=1)
def _lexical() -> Bm25Lexical:
    return Bm25Lexical()


def bm25_scores(query: str, fields: Mapping[int, str]) -> dict[int, float]:
    """BM25 of ``query`` over short fields (page -> text), with the store's own tokenizer,
    stopwords and stemmer (:class:`Bm25Lexical`) and IDF over these fields; zeros left out."""
    lexical = _lexical()
    docs = {
        page: dict(zip(v.indices, v.values, strict=True))
        for page, text in fields.items()
        if (v := lexical.embed_page(text)).indices
    }
    if not docs:
        return {}
    n = len(docs)
    df: Counter[int] = Counter()
    for weights in docs.values():
        df.update(weights.keys())
    q = set(lexical.embed_query(query).indices)
    scores: dict[int, float] = {}
    for page, weights in docs.items():
        score = sum(
            math.log(1 + (n - df[t] + 0.5) / (df[t] + 0.5)) * weights[t] for t in q & weights.keys()
        )
        if score > 0:
            scores[page] = score
    return scores


def schema_ranking(query: str, schemas: Iterable[DocumentSchema]) -> dict[PageRef, float]:
    """Pages of the documents in scope ranked by BM25 of ``query`` on their schema field."""
    ranking: dict[PageRef, float] = {}
    for schema in schemas:
        for page, score in bm25_scores(query, page_fields(schema)).items():
            ranking[PageRef(schema.doc_id, page)] = score
    return dict(sorted(ranking.items(), key=lambda kv: (-kv[1], kv[0].doc_id, kv[0].page)))
