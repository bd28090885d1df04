"""Levers on DocMemo's loop (issue 14), each a pure module behind a switch in ``DocMemoConfig``.

- :mod:`.fusion`: fuse the question's ranking with other rankings of later rounds.
- :mod:`.subqueries`: split a multi-part question into parts searched on their own.
- :mod:`.budget`: the pages read per round (budget shape at a fixed total).
- :mod:`.priors`: a Beta prior calibrated from the first-stage retrieval score.
- :mod:`.structure`: propagation along the document's reference graph.
- :mod:`.rounds`: the one hook the loop calls (store I/O for the levers that search).
"""
