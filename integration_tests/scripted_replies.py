"""One scripted LLM for the documentation's examples: a judge, a page reader and a synthesizer.

The examples (README and docs blocks, ``examples/*.py``) send every kind of request an app
sends: DocMemo's reader asks for JSON with a schema, the stock engines' synthesizer for text,
``docmemo compare``'s judge for a score or a preference. :func:`answer` replies to each in the
form it expects, so the examples run end to end against ``fake_vllm_server.FakeVLLM``.
"""

from __future__ import annotations

import json

from fake_vllm_server import SHOWN_PAGE, Reply, Request

READING = {
    "notes": [{"page": 1, "fact": "Revenue 2023 was $5.2M"}],
    "useful_pages": [1],
    "irrelevant_pages": [],
    "missing": [],
    "status": "answered",
    "answer": "$5.2M",
    "refined_query": None,
}
"""A reader's whole reply to one reading: the first page shown answers the question."""


def reader_reply(**fields: object) -> str:
    """:data:`READING` with ``fields`` replaced, as the JSON a server sends back."""
    return json.dumps({**READING, **fields})


ANSWER = "1,184 employees"
"""What every reader and synthesizer answers (the demo report's Nordic head count)."""


def answer(request: Request) -> Reply:
    """Verdicts for a judge, reader JSON when a schema is asked for, plain text otherwise: the
    first page shown is useful and answers the question, the others are irrelevant."""
    text = request.text
    if "## Reference Answer" in text:
        return Reply("4.0\nClose to the reference.")
    if "Assistant A’s Answer" in text:
        return Reply("[[A]]")
    if request.schema is None and "validates against this JSON schema" not in text:
        return Reply(f"From the context: {ANSWER}.")
    shown = [int(n) for n, _, _ in SHOWN_PAGE.findall(text)]
    reply = {
        "notes": [{"page": n, "fact": ANSWER} for n in shown[:1]],
        "useful_pages": shown[:1],
        "irrelevant_pages": shown[1:],
        "missing": [],
        "status": "answered" if shown else "need_more",
        "answer": ANSWER if shown else None,
        "refined_query": None,
    }
    return Reply(json.dumps(reply))
