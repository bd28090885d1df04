"""Untrusted text (document pages, an LLM's own reply) inside a prompt, in one fence.

Prompts tell the model that what stands between ``<document>`` tags is data, never instructions;
the text is escaped so that it cannot close the fence early and talk outside it. Pure: no I/O.
"""

from __future__ import annotations


def fenced(text: str) -> str:
    """``text`` between ``<document>`` tags, with any tag inside it defused."""
    safe = text.replace("<document>", "< document>").replace("</document>", "</ document>")
    return f"<document>\n{safe}\n</document>"
