"""Levers on DocMemo's loop (issue 14): pure rules, each behind a switch in ``LeverSettings``.

- :mod:`.references`: pages the question names ("page 25", "the cover", "Figure 9"), and
  propagation along the document's reference graph.
- :mod:`.statements`: the primary statements a financial metric is computed from, searched and
  fused with the question's ranking in later rounds.
- :mod:`.document_stage`: the documents' cards and priors over a scope of several documents.
- :mod:`.rounds`: the one hook the loop calls (the store and encoder I/O, as steps).
"""
