"""``report.md`` of a comparison: settings, totals with intervals, and every answer side by side."""

from __future__ import annotations

import html
from collections.abc import Mapping, Sequence
from typing import Any

from llama_index_docmemo.evaluation.compare.questions import Question
from llama_index_docmemo.evaluation.compare.records import AnswerRecord
from llama_index_docmemo.evidence.citations import Citation


def interval(est: Mapping[str, Any], scale: float = 100.0, digits: int = 0, unit: str = "") -> str:
    """``mean [low, high]`` of an estimate (``scale`` 100 for shares, 1 for counts)."""
    if est.get("mean") is None:
        return "—"
    low, high = est["ci"]
    mean = est["mean"]
    return f"{scale * mean:.{digits}f}{unit} [{scale * low:.{digits}f}, {scale * high:.{digits}f}]"


def signed(est: Mapping[str, Any], scale: float = 100.0, digits: int = 0) -> str:
    if est.get("diff") is None:
        return "—"
    low, high = est["ci"]
    return (
        f"{scale * est['diff']:+.{digits}f} [{scale * low:+.{digits}f}, {scale * high:+.{digits}f}]"
    )


def verdict_text(record: AnswerRecord) -> str:
    """A record's verdicts in words, each with who judged."""
    if record.error is not None:
        return "not judged: the engine gave no answer"
    parts = []
    if record.correctness is not None:
        verdict = record.correctness
        if verdict.get("passing") is None and verdict["method"] == "not judged":
            parts.append("not judged (no judge model for this answer)")
        elif verdict.get("passing") is None:
            parts.append(f"not judged ({verdict['method']}: {verdict['judge']} gave no verdict)")
        else:
            passing = "correct" if verdict["passing"] else "wrong"
            score = f" {verdict['score']:g}/5" if verdict.get("score") is not None else ""
            parts.append(f"{passing}{score} ({verdict['method']}, {verdict['judge']})")
    for other, verdict in record.pairwise.items():
        if verdict.get("result") is None:
            parts.append(f"vs {other}: judge failed")
        else:
            parts.append(f"vs {other}: {verdict['result']} ({verdict['judge']}, both orders)")
    return "; ".join(parts) or "not judged (no expected answer, no judge model)"


def title(meta: Mapping[str, Any]) -> str:
    return "Comparison: " + " vs ".join(meta["engines"])


def setting_lines(meta: Mapping[str, Any]) -> list[str]:
    """What was compared, with what, judged by whom, at which budget."""
    judge = meta.get("judge")
    lines = [
        f"Documents: `{meta['docs']}` ({meta['pages_in_store']} pages). Questions: "
        f"{meta['questions']}. LLM (every engine): **{meta['llm']}**.",
        "",
        (
            f"Judge: **{judge}** (LlamaIndex CorrectnessEvaluator with expected answers, "
            "PairwiseComparisonEvaluator in both orders without); short numeric and "
            "'Not answerable' expected answers by exact rules."
            if judge
            else "Judge: none (no judge model): short numeric and 'Not answerable' expected "
            "answers are judged by exact rules, other answers are not judged."
        ),
        "",
        "Budgets (equal in tokens):",
        *[f"- `{name}`: {budget}" for name, budget in meta["budgets"].items()],
        "",
    ]
    if meta.get("ocr_pages"):
        lines += [
            f"{meta['ocr_pages']} of {meta['pages_in_store']} pages have no text layer: DocMemo and "
            "the `-ocr` engines read their OCR text, `stock` and `stock-bm25` nothing.",
            "",
        ]
    return lines


Table = tuple[list[str], list[list[str]]]


def totals_table(totals: Mapping[str, Any]) -> Table:
    """Per-engine totals as (header, rows) of text cells."""
    header = [
        "engine",
        "correct",
        "judged by",
        "verified figures (on pages cited or read)",
        "LLM calls",
        "prompt tokens",
        "completion tokens",
        "images",
        "image tokens (estimate)",
        "seconds",
    ]
    rows = []
    for name, t in totals["engines"].items():
        cost = t["cost"]
        figures = f"{t['figures_verified']}/{t['figures']}"
        share = t["figures_verified_share"]
        if share["mean"] is not None:
            figures += f" (per answer {interval(share, unit='%')})"
        missing = f" ({t['requests_without_usage']} requests counted by the tokenizer)" * bool(
            t["requests_without_usage"]
        )
        rows.append(
            [
                name,
                interval(t["correct"], unit="%"),
                ", ".join(t["correct"]["judged_by"]) or "—",
                figures,
                interval(cost["llm_calls"], 1, 1),
                interval(cost["prompt_tokens"], 1) + missing,
                interval(cost["completion_tokens"], 1),
                interval(cost["images"], 1, 1),
                interval(cost["image_tokens"], 1),
                interval(cost["seconds"], 1, 1),
            ]
        )
    return header, rows


def versus_table(totals: Mapping[str, Any]) -> Table:
    """DocMemo minus each other engine as (header, rows) of text cells."""
    header = [
        "engine",
        "correct (points)",
        "verified figures (points)",
        "LLM calls",
        "prompt tokens",
        "seconds",
        "pairwise win / tie / loss (judge, both orders)",
    ]
    rows = []
    for name, v in totals["versus"].items():
        pair = v["pairwise"]
        judged = pair["win"] + pair["tie"] + pair["loss"]
        rows.append(
            [
                name,
                signed(v["correct"]),
                signed(v["figures_verified_share"]),
                signed(v["cost"]["llm_calls"], 1, 1),
                signed(v["cost"]["prompt_tokens"], 1),
                signed(v["cost"]["seconds"], 1, 1),
                f"{pair['win']} / {pair['tie']} / {pair['loss']} ({', '.join(pair['judged_by'])})"
                if judged
                else "—",
            ]
        )
    return header, rows


def _markdown_table(table: Table) -> list[str]:
    header, rows = table
    return [
        "| " + " | ".join(_cell(h) for h in header) + " |",
        "|" + "---|" * len(header),
        *["| " + " | ".join(_cell(c) for c in row) + " |" for row in rows],
        "",
    ]


def totals_lines(totals: Mapping[str, Any]) -> list[str]:
    lines = [TOTALS_TITLE, "", *_markdown_table(totals_table(totals))]
    if totals["versus"]:
        lines += [VERSUS_TITLE, "", *_markdown_table(versus_table(totals))]
    return lines


TOTALS_TITLE = "## Totals (mean per question [95% bootstrap interval over questions])"
VERSUS_TITLE = "## DocMemo minus each engine (paired over the same questions [95% interval])"


def _inert(text: str) -> str:
    """Text from questions, answers, PDFs or settings, made inert for a Markdown renderer
    (GitHub, mkdocs pass raw HTML through): HTML escaped, and no ``[link](javascript:...)``.
    Escaped here, not in the shared lines and tables: report.html escapes those itself."""
    return html.escape(text, quote=False).replace("](", "\\](")


def _cell(text: str) -> str:
    """One table cell (or heading): inert, on one line, its pipes escaped."""
    return _inert(" ".join(text.split())).replace("|", "\\|")


def _figure_cell(figure: Citation) -> str:
    """``41.5 million ✓ alpha.pdf p.4`` for a verified figure, ``35.8 million ✓ difference: 248.3
    million − 212.5 million`` for one computed from them, ``9,731 ✗`` for one on no page read."""
    if figure.how == "computed":
        return f"{figure.text} ✓ {figure.computed}"
    if not figure.verified or figure.ref is None:
        return f"{figure.text} ✗"
    return f"{figure.text} ✓ {figure.ref.doc_id} p.{figure.ref.page}"


def question_lines(question: Question, records: Sequence[AnswerRecord]) -> list[str]:
    lines = [f"### {_cell(question.qid)}: {_cell(question.text)}", ""]
    if question.expected is not None:
        lines += [f"Expected: {_cell(question.expected)}", ""]
    lines += [
        "| engine | answer | verdict | verified figures | cited pages | LLM calls / tokens / images (est. tokens) / s |",
        "|---|---|---|---|---|---|",
    ]
    for r in records:
        answer = f"ERROR: {r.error}" if r.error else r.answer
        figures = ", ".join(map(_figure_cell, r.figures)) or "—"
        cited = ", ".join(f"{p.doc_id} p.{p.page}" for p in r.cited_pages) or "—"
        lines.append(
            f"| {_cell(r.engine)} | {_cell(answer)} | {_cell(verdict_text(r))} | {_cell(figures)} | "
            f"{_cell(cited)} | {r.llm_calls} / {r.prompt_tokens}+{r.completion_tokens} / "
            f"{r.images} ({r.image_tokens}) / {r.seconds:.1f} |"
        )
    return [*lines, ""]


def render_markdown(
    meta: Mapping[str, Any],
    totals: Mapping[str, Any],
    questions: Sequence[Question],
    by_question: Mapping[str, Sequence[AnswerRecord]],
) -> str:
    lines = [f"# {_inert(title(meta))}", ""]
    lines += [_inert(line) for line in setting_lines(meta)]
    lines += totals_lines(totals) + ["## Answers", ""]
    for question in questions:
        lines += question_lines(question, by_question.get(question.qid, []))
    return "\n".join(lines)
