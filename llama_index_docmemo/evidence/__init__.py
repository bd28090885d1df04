"""Evidence you can check: what an answer claims and where the pages read say it.

``matching`` holds the matching rules (pure text: figures, names, quotes, computed figures),
``citations`` builds and verifies an answer's citations with them and decides when the evidence
is too weak (pure), ``pages`` draws boxes on a rendered page and ``html`` writes the answer page
of ``docmemo ask --html``. A citation's box on the PDF page is found with the query's result
(:mod:`llama_index_docmemo.loop.result`, the one piece of I/O the citations need).
"""
