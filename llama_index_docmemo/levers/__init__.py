"""Levers on DocMemo's loop (issue 14), each a pure module behind a switch in ``LeverSettings``.

- :mod:`.question_refs`: pages the question names ("page 25", "the cover", "Figure 9").
- :mod:`.reference_boosts`: propagation along the document's reference graph.
- :mod:`.financial`: the primary statements a financial metric is computed from.
- :mod:`.ranking_fusion`: fuse the question's ranking with the levers' rankings in later rounds.
- :mod:`.rounds`: the one hook the loop calls (the store and encoder I/O, as steps).
"""
