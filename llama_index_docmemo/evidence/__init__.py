"""Evidence you can check: what an answer claims and where the pages read say it.

``matching`` holds the matching rules (pure text: figures, names, quotes, computed figures),
``citations`` builds and verifies an answer's citations with them and decides when the evidence
is too weak (pure), ``boxes`` finds a citation's box on the PDF page, ``pages`` draws boxes on a
rendered page and ``html`` writes the answer page of ``docmemo ask --html``.
"""
