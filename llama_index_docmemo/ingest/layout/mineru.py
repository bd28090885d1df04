"""Read MinerU output of any generation into layout blocks (PDF points, top-left origin, 1-based pages).

Three generations are in the wild:

* MinerU 4.x (``mineru-kit parse in.pdf -o out.zip -f zip``): ``middle_json.json`` with ``pages[].blocks[]``,
  bboxes normalised to 0-1 from the top-left, page sizes in points under ``extensions.docvortex_layout``.
* MinerU 2.x/3.x: ``<stem>_content_list.json`` (flat items, bbox on a 0-1000 grid) beside ``<stem>_middle.json``
  (``pdf_info[]`` pages with ``page_size`` and ``para_blocks`` in points).
* magic-pdf 1.x: the same file names, but content-list items carry no bbox: only its middle.json locates blocks.

Parsing functions take decoded JSON (pure); :func:`read_mineru_output` finds and loads the files.
"""

from __future__ import annotations

import html as html_lib
import json
import re
import zipfile
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, Literal

from llama_index_docmemo.errors import IngestError
from llama_index_docmemo.ingest.layout.blocks import LayoutBlock, normalize_kind, scale_box

Generation = Literal["mineru-4", "mineru-2", "magic-pdf-1"]
BlocksByPage = dict[int, list[LayoutBlock]]

_CAPTION_PARTS = ("_caption",)
_FOOTNOTE_PARTS = ("_footnote",)
_BODY_SUFFIX = "_body"


def read_mineru_output(path: str | Path) -> BlocksByPage:
    """Layout blocks per 1-based page from a MinerU output zip, folder or JSON file, any generation."""
    files = _load_json_files(Path(path))
    generation = detect_generation(files)
    if generation == "mineru-4":
        return parse_mineru4_middle(_pick(files, "middle_json.json", path))
    middle = _pick(files, "_middle.json", path, required=False)
    content = _pick(files, "_content_list.json", path, required=False)
    if generation == "mineru-2" and content is not None:
        if middle is None:
            raise IngestError(
                str(path), "MinerU 2.x/3.x content_list found without its _middle.json (page sizes)"
            )
        return parse_content_list(content, page_sizes_from_legacy_middle(middle), source=generation)
    if middle is None:
        raise IngestError(
            str(path),
            "magic-pdf 1.x output needs its <stem>_middle.json (content_list has no bbox)",
        )
    return parse_legacy_middle(middle, source=generation)


def detect_generation(files: Mapping[str, Any]) -> Generation:
    """Which MinerU generation wrote these files (name -> decoded JSON)."""
    for name, data in files.items():
        if name.endswith("middle_json.json") or _is_mineru4(data):
            return "mineru-4"
    for name, data in files.items():
        if name.endswith("_content_list.json") and isinstance(data, list):
            items = [i for i in data if isinstance(i, dict)]
            if items and any("bbox" in i for i in items):
                return "mineru-2"
            return "magic-pdf-1"
    for name, data in files.items():
        if name.endswith("_middle.json") and isinstance(data, dict) and "pdf_info" in data:
            version = str(data.get("_version_name", ""))
            return "magic-pdf-1" if version.startswith(("0.", "1.")) else "mineru-2"
    raise IngestError(
        ", ".join(sorted(files)) or "(no files)", "no MinerU middle/content_list JSON recognised"
    )


def _is_mineru4(data: Any) -> bool:
    return (
        isinstance(data, dict)
        and isinstance(data.get("pages"), list)
        and "pdf_info" not in data
        and (
            "docvortex_layout" in (data.get("extensions") or {})
            or str(data.get("schema", "")).startswith("docvortex")
        )
    )


def parse_mineru4_middle(data: Mapping[str, Any]) -> BlocksByPage:
    """MinerU 4.x ``middle_json.json``: bboxes are 0-1 of the page, sizes in ``extensions.docvortex_layout``."""
    sizes = {
        int(p["page_idx"]): (float(p["width_pt"]), float(p["height_pt"]))
        for p in ((data.get("extensions") or {}).get("docvortex_layout") or {}).get("pages", [])
    }
    out: BlocksByPage = {}
    for page in data.get("pages", []):
        idx = int(page.get("page_idx", 0))
        if idx not in sizes:
            raise IngestError(
                "middle_json.json", "no page size under extensions.docvortex_layout", page=idx + 1
            )
        width, height = sizes[idx]
        blocks = [
            _block_from_tree(b, idx + 1, width, height, "mineru-4") for b in page.get("blocks", [])
        ]
        out[idx + 1] = [b for b in blocks if b is not None]
    return out


def parse_content_list(
    items: Iterable[Mapping[str, Any]],
    page_sizes: Mapping[int, tuple[float, float]],
    source: str = "mineru-2",
) -> BlocksByPage:
    """MinerU 2.x/3.x content list (bbox on a 0-1000 grid); ``page_sizes`` maps 0-based page -> points."""
    out: BlocksByPage = {}
    for item in items:
        if "bbox" not in item:
            continue
        idx = int(item.get("page_idx", 0))
        if idx not in page_sizes:
            raise IngestError(
                "content_list.json", "no page size in the middle.json for this page", page=idx + 1
            )
        width, height = page_sizes[idx]
        raw = str(item.get("type", "text"))
        kind = "chart" if item.get("sub_type") == "chart" else normalize_kind(raw)
        if kind == "text" and item.get("text_level"):
            kind = "title"
        caption = " ".join(_strings(item.get(f"{raw}_caption")))
        html = str(item.get("table_body", "")) if raw == "table" else ""
        text = _text_of_item(item, raw)
        out.setdefault(idx + 1, []).append(
            LayoutBlock(
                page=idx + 1,
                kind=kind,
                bbox=scale_box(tuple(item["bbox"]), width / 1000.0, height / 1000.0),
                caption=caption,
                text=text,
                html=html,
                source=source,
            )
        )
    return out


def page_sizes_from_legacy_middle(data: Mapping[str, Any]) -> dict[int, tuple[float, float]]:
    """0-based page -> (width, height) in points from a 1.x-3.x ``_middle.json``."""
    sizes: dict[int, tuple[float, float]] = {}
    for pos, page in enumerate(data.get("pdf_info", [])):
        width, height = page["page_size"]
        sizes[int(page.get("page_idx", pos))] = (float(width), float(height))
    return sizes


def parse_legacy_middle(data: Mapping[str, Any], source: str = "magic-pdf-1") -> BlocksByPage:
    """A 1.x-3.x ``_middle.json``: ``pdf_info[].para_blocks`` already in PDF points."""
    out: BlocksByPage = {}
    for pos, page in enumerate(data.get("pdf_info", [])):
        idx = int(page.get("page_idx", pos))
        raw_blocks = page.get("para_blocks") or page.get("preproc_blocks") or []
        blocks = [_block_from_tree(b, idx + 1, 1.0, 1.0, source) for b in raw_blocks]
        out[idx + 1] = [b for b in blocks if b is not None]
    return out


def _block_from_tree(
    block: Mapping[str, Any], page: int, sx: float, sy: float, source: str
) -> LayoutBlock | None:
    """One top-level block; visual parents (table/image/chart) hold body/caption/footnote children."""
    raw = str(block.get("type", ""))
    bbox = block.get("bbox")
    if not bbox or len(bbox) != 4:
        return None
    kind = "chart" if block.get("sub_type") == "chart" else normalize_kind(raw)
    children = [c for c in _children(block) if isinstance(c, Mapping) and "type" in c]
    caption_parts: list[str] = []
    body_parts: list[str] = []
    html = ""
    for child in children:
        ctype = str(child["type"])
        if ctype.endswith(_CAPTION_PARTS):
            caption_parts.extend(_strings(child))
        elif ctype.endswith(_FOOTNOTE_PARTS):
            continue
        elif ctype.endswith(_BODY_SUFFIX):
            strings = _strings(child)
            html = next((s for s in strings if s.lstrip().startswith("<table")), html)
            body_parts.extend(s for s in strings if not s.lstrip().startswith("<"))
    if not children:
        body_parts = _strings(block)
    text = " ".join(body_parts) or (_html_text(html) if html else "")
    return LayoutBlock(
        page=page,
        kind=kind,
        bbox=scale_box(tuple(bbox), sx, sy),
        caption=" ".join(caption_parts),
        text=text,
        html=html,
        source=source,
    )


def _children(block: Mapping[str, Any]) -> list[Any]:
    """4.x nests parts under ``content``; 1.x-3.x under ``blocks``."""
    nested = block.get("blocks")
    if isinstance(nested, list):
        return nested
    content = block.get("content")
    if isinstance(content, list) and any(
        isinstance(c, Mapping)
        and str(c.get("type", "")).endswith(("_body", "_caption", "_footnote"))
        for c in content
    ):
        return content
    return []


def _strings(value: Any) -> list[str]:
    """All text leaves of a block: ``content``/``html``/``latex`` strings of spans, lines and parts."""
    if value is None:
        return []
    if isinstance(value, str):
        return [value.strip()] if value.strip() else []
    if isinstance(value, list):
        return [s for v in value for s in _strings(v)]
    if isinstance(value, Mapping):
        out: list[str] = []
        for key in ("content", "html", "latex", "text"):
            if key in value:
                out.extend(_strings(value[key]))
        for key in ("lines", "spans", "blocks"):
            if key in value:
                out.extend(_strings(value[key]))
        return out
    return []


def _text_of_item(item: Mapping[str, Any], raw: str) -> str:
    if raw == "table":
        return _html_text(str(item.get("table_body", "")))
    if "list_items" in item:
        return " ".join(_strings(item["list_items"]))
    return " ".join(_strings(item.get("text")) + _strings(item.get("content")))


def _html_text(html: str) -> str:
    """Cell text of a table's HTML, cells separated by ' | ' and rows by newlines."""
    rows = re.split(r"</tr\s*>", html, flags=re.I)
    lines = []
    for row in rows:
        cells = [
            html_lib.unescape(re.sub(r"<[^>]+>", "", c)).strip()
            for c in re.split(r"</t[dh]\s*>", row, flags=re.I)
        ]
        cells = [c for c in cells if c]
        if cells:
            lines.append(" | ".join(cells))
    return "\n".join(lines)


def _load_json_files(path: Path) -> dict[str, Any]:
    """Name -> decoded JSON of the MinerU files in a zip, a folder (searched recursively) or one file."""
    wanted = ("middle_json.json", "_middle.json", "_content_list.json")
    if not path.exists():
        raise IngestError(str(path), "MinerU output not found")
    try:
        if path.is_file() and zipfile.is_zipfile(path):
            with zipfile.ZipFile(path) as zf:
                return {n: json.loads(zf.read(n)) for n in zf.namelist() if n.endswith(wanted)}
        if path.is_dir():
            return {
                str(p.relative_to(path)): json.loads(p.read_text(encoding="utf-8"))
                for p in sorted(path.rglob("*.json"))
                if p.name.endswith(wanted)
            }
        return {path.name: json.loads(path.read_text(encoding="utf-8"))}
    except (json.JSONDecodeError, UnicodeDecodeError, zipfile.BadZipFile) as exc:
        raise IngestError(str(path), f"not valid MinerU JSON output: {exc}") from exc


def _pick(files: Mapping[str, Any], suffix: str, where: str | Path, required: bool = True) -> Any:
    names = [n for n in files if n.endswith(suffix) and not n.endswith("_content_list_v2.json")]
    if not names:
        if required:
            raise IngestError(str(where), f"no *{suffix} in the MinerU output")
        return None
    return files[sorted(names, key=len)[0]]
