"""Build the evaluation harness's data folder (``pdfs/`` + ``qa.jsonl`` + ``docs.tsv``) from the
public downloads of MMLongBench-Doc and FinanceBench, so ``docmemo eval --data OUT`` runs on them.

Sources (research data, CC BY-NC 4.0 as their authors state; fetch them yourself):

- **MMLongBench-Doc** (Ma et al., NeurIPS 2024): the repository ``mayubo2333/MMLongBench-Doc``,
  ``data/samples.json`` (a JSON list of ``{"doc_id", "doc_type", "question", "answer",
  "evidence_pages": "[5, 6]", "evidence_sources": "['Chart']", "answer_format"}``, the lists
  written as Python literals) and the PDFs in ``data/documents/``.
- **FinanceBench** (Islam et al., 2023): the repository ``patronus-ai/financebench``,
  ``data/financebench_open_source.jsonl`` (one question a line: ``{"financebench_id",
  "doc_name", "question", "answer", "question_type", "question_reasoning", "evidence":
  [{"doc_name", "evidence_page_num"}]}``, pages **0-based**) and the PDFs in ``pdfs/``
  (``<doc_name>.pdf``).

What comes out, one question a line of ``qa.jsonl`` (the fields of
``llama_index_docmemo/evaluation/datasets.py``): ``qid`` (``mmlb-NNNN``, the question's index in
``samples.json``; FinanceBench's own id), ``doc``, ``question``, ``answer``, ``evidence_pages``
(1-based, sorted; ``[]`` for "Not answerable"), ``answer_format`` (MMLongBench-Doc's; null for
FinanceBench), ``n_pages``, ``evidence_valid`` (false when a gold page lies outside the document:
the harness leaves the question out of page metrics), and the source's extra fields
(``evidence_sources``, ``doc_type``; ``question_type``, ``question_reasoning``). A question
whose PDF is missing is left out and counted; a PDF that does not open stops the build, named.

    python benchmarks/build_dataset.py mmlongbench --source MMLongBench-Doc/data \\
        --out data/mmlongbench-doc [--docs names.txt] [--link]
    python benchmarks/build_dataset.py financebench --source financebench \\
        --out data/financebench [--docs names.txt] [--link]

``--docs FILE`` keeps the documents named in it (one file name a line), ``--link`` symlinks the
PDFs instead of copying them.
"""

from __future__ import annotations

import argparse
import ast
import hashlib
import json
import shutil
import sys
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pymupdf

NOT_ANSWERABLE = "Not answerable"


class SourceError(ValueError):
    """A source file is not in the public release's shape: names the file and the entry."""


@dataclass(frozen=True)
class Layout:
    """Where a public release keeps its questions and its PDFs, relative to ``--source``."""

    questions: str
    pdfs: str


LAYOUTS = {
    "mmlongbench": Layout("samples.json", "documents"),
    "financebench": Layout("data/financebench_open_source.jsonl", "pdfs"),
}


def _literal_list(value: Any, where: str) -> list[Any]:
    """A list written as a Python literal (``"[5, 6]"``, ``"['Chart']"``) or already a list."""
    if isinstance(value, list):
        return value
    try:
        parsed = ast.literal_eval(value) if isinstance(value, str) else None
    except (ValueError, SyntaxError):
        parsed = None
    if not isinstance(parsed, list):
        raise SourceError(f"{where}: expected a list, got {value!r}")
    return parsed


def mmlongbench_questions(samples: list[dict[str, Any]], source: str) -> Iterator[dict[str, Any]]:
    """``samples.json``'s entries as ``qa.jsonl`` rows (without ``n_pages``/``evidence_valid``)."""
    for index, sample in enumerate(samples):
        where = f"{source}[{index}]"
        try:
            pages = [int(p) for p in _literal_list(sample["evidence_pages"], where)]
            yield {
                "qid": f"mmlb-{index:04d}",
                "doc": sample["doc_id"],
                "question": sample["question"],
                "answer": str(sample["answer"]),
                "evidence_pages": sorted(set(pages)),
                "answer_format": sample.get("answer_format"),
                "evidence_sources": _literal_list(sample.get("evidence_sources", "[]"), where),
                "doc_type": sample.get("doc_type"),
            }
        except KeyError as missing:
            raise SourceError(f"{where}: no field {missing}") from None


def financebench_questions(lines: Iterable[str], source: str) -> Iterator[dict[str, Any]]:
    """FinanceBench's JSON lines as ``qa.jsonl`` rows: the evidence pages of the question's own
    document, 0-based to 1-based."""
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        where = f"{source}:{number}"
        try:
            row = json.loads(line)
            doc = row["doc_name"]
            pages = {
                int(e["evidence_page_num"]) + 1
                for e in row["evidence"]
                if e.get("doc_name", doc) == doc
            }
            yield {
                "qid": row["financebench_id"],
                "doc": f"{doc}.pdf",
                "question": row["question"],
                "answer": str(row["answer"]),
                "evidence_pages": sorted(pages),
                "answer_format": None,
                "question_type": row.get("question_type"),
                "question_reasoning": row.get("question_reasoning"),
            }
        except json.JSONDecodeError as error:
            raise SourceError(f"{where}: not JSON ({error.msg})") from None
        except KeyError as missing:
            raise SourceError(f"{where}: no field {missing}") from None


def read_questions(kind: str, path: Path) -> list[dict[str, Any]]:
    """The questions of a public release's question file, as ``qa.jsonl`` rows."""
    if not path.is_file():
        raise SourceError(f"{path}: not found (the {kind} question file)")
    text = path.read_text(encoding="utf-8")
    if kind == "financebench":
        return list(financebench_questions(text.splitlines(), str(path)))
    try:
        samples = json.loads(text)
    except json.JSONDecodeError as error:
        raise SourceError(f"{path}: not JSON ({error.msg})") from None
    if not isinstance(samples, list):
        raise SourceError(f"{path}: expected a JSON list of questions")
    return list(mmlongbench_questions(samples, str(path)))


@dataclass(frozen=True)
class DocInfo:
    """A PDF of the set as ``docs.tsv`` lists it."""

    name: str
    size: int
    pages: int
    text_layer: bool
    sha256: str


def describe_pdf(path: Path) -> DocInfo:
    """Pages, text layer and hash of one PDF; a PDF that does not open is named."""
    try:
        with pymupdf.open(path) as pdf:
            pages = pdf.page_count
            text_layer = any(page.get_text().strip() for page in pdf)
    except (RuntimeError, ValueError) as error:  # PyMuPDF's FileDataError is a RuntimeError
        raise SourceError(f"{path}: not a readable PDF ({error})") from None
    data = path.read_bytes()
    return DocInfo(path.name, len(data), pages, text_layer, hashlib.sha256(data).hexdigest())


def with_checks(row: dict[str, Any], pages: int) -> dict[str, Any]:
    """The row with ``n_pages`` and ``evidence_valid`` (every gold page inside the document)."""
    fields = ("qid", "doc", "question", "answer", "evidence_pages", "answer_format")
    base = {k: row[k] for k in fields}
    extra = {k: v for k, v in row.items() if k not in base}
    valid = all(1 <= p <= pages for p in row["evidence_pages"])
    return {**base, "n_pages": pages, "evidence_valid": valid, **extra}


@dataclass(frozen=True)
class BuildReport:
    questions: int
    docs: int
    missing_docs: tuple[str, ...]
    skipped_questions: int
    invalid: int

    def summary(self) -> str:
        missing = (
            f"; {self.skipped_questions} questions left out, their PDF missing: "
            + ", ".join(self.missing_docs[:5])
            + (" ..." if len(self.missing_docs) > 5 else "")
            if self.missing_docs
            else ""
        )
        return (
            f"{self.questions} questions over {self.docs} PDFs "
            f"({self.invalid} with a gold page outside the document){missing}"
        )


def build(
    kind: str, source: Path, out: Path, keep: set[str] | None = None, link: bool = False
) -> BuildReport:
    """Write ``out/pdfs/``, ``out/qa.jsonl`` and ``out/docs.tsv`` from a public release."""
    layout = LAYOUTS[kind]
    rows = read_questions(kind, source / layout.questions)
    if keep is not None:
        rows = [r for r in rows if r["doc"] in keep]
    pdf_dir = source / layout.pdfs
    present = {r["doc"] for r in rows if (pdf_dir / r["doc"]).is_file()}
    missing = sorted({r["doc"] for r in rows} - present)
    (out / "pdfs").mkdir(parents=True, exist_ok=True)
    infos: dict[str, DocInfo] = {}
    for name in sorted(present):
        infos[name] = describe_pdf(pdf_dir / name)
        target = out / "pdfs" / name
        target.unlink(missing_ok=True)
        if link:
            target.symlink_to((pdf_dir / name).resolve())
        else:
            shutil.copyfile(pdf_dir / name, target)
    kept = [with_checks(r, infos[r["doc"]].pages) for r in rows if r["doc"] in present]
    with (out / "qa.jsonl").open("w", encoding="utf-8") as qa:
        for row in kept:
            qa.write(json.dumps(row, ensure_ascii=False) + "\n")
    counts = {name: sum(r["doc"] == name for r in kept) for name in infos}
    with (out / "docs.tsv").open("w", encoding="utf-8") as docs:
        docs.write("doc\tbytes\tn_pages\tn_questions\ttext_layer\tsha256\n")
        for info in infos.values():
            layer = "yes" if info.text_layer else "no"
            docs.write(
                f"{info.name}\t{info.size}\t{info.pages}\t{counts[info.name]}\t{layer}\t"
                f"{info.sha256}\n"
            )
    return BuildReport(
        questions=len(kept),
        docs=len(infos),
        missing_docs=tuple(missing),
        skipped_questions=len(rows) - len(kept),
        invalid=sum(not r["evidence_valid"] for r in kept),
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("kind", choices=sorted(LAYOUTS))
    parser.add_argument(
        "--source",
        type=Path,
        required=True,
        help="the download: MMLongBench-Doc's data/ folder, or FinanceBench's repository",
    )
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--docs", type=Path, help="keep these documents (a file name a line)")
    parser.add_argument("--link", action="store_true", help="symlink the PDFs, do not copy")
    args = parser.parse_args(argv)
    keep = None
    if args.docs is not None:
        keep = {line.strip() for line in args.docs.read_text().splitlines() if line.strip()}
    try:
        report = build(args.kind, args.source, args.out, keep, args.link)
    except SourceError as error:
        print(f"build_dataset: error: {error}", file=sys.stderr)
        return 2
    print(f"{args.out}: {report.summary()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
