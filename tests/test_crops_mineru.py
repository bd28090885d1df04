"""MinerU output of all three generations parses into the same blocks (points, top-left origin, 1-based pages)."""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

import pytest

from llama_index_docmemo.errors import IngestError
from llama_index_docmemo.ingest.layout import detect_generation, read_mineru_output

W, H = 612.0, 792.0
TABLE_HTML = (
    "<table><tr><td>Region</td><td>Revenue</td></tr><tr><td>North</td><td>1200</td></tr></table>"
)
# The same page in points: a table at (72, 220)-(512, 320) captioned above, a chart at (100, 420)-(400, 636).
TABLE_PT = (72.0, 220.0, 512.0, 320.0)
CHART_PT = (100.0, 420.0, 400.0, 636.0)


def _norm(box: tuple[float, ...], scale: float) -> list[float]:
    return [box[0] / W * scale, box[1] / H * scale, box[2] / W * scale, box[3] / H * scale]


def mineru4_middle() -> dict:
    """Shape written by ``mineru-kit parse -f zip`` 4.0.12 (middle_json.json)."""
    return {
        "metadata": {"producer": {"name": "mineru", "version": "4.0.12"}},
        "extensions": {
            "mineru": {"tier": "flash", "parse_mode": "txt"},
            "docvortex_layout": {
                "version": 1,
                "pages": [{"page_idx": 0, "width_pt": W, "height_pt": H}],
            },
        },
        "pages": [
            {
                "page_idx": 0,
                "blocks": [
                    {
                        "type": "doc_title",
                        "bbox": _norm((72, 57, 368, 75), 1),
                        "content": [{"type": "text", "content": "Report"}],
                    },
                    {
                        "type": "table",
                        "bbox": _norm(TABLE_PT, 1),
                        "content": [
                            {
                                "type": "table_caption",
                                "bbox": _norm((72, 203, 230, 214), 1),
                                "content": [
                                    {"type": "text", "content": "Table 1: Revenue by region"}
                                ],
                            },
                            {
                                "type": "table_body",
                                "bbox": _norm(TABLE_PT, 1),
                                "image_path": "images/t.jpg",
                                "content": TABLE_HTML,
                            },
                        ],
                    },
                    {
                        "type": "chart",
                        "bbox": _norm(CHART_PT, 1),
                        "content": [
                            {
                                "type": "chart_body",
                                "bbox": _norm(CHART_PT, 1),
                                "content": "North South",
                            },
                            {
                                "type": "chart_caption",
                                "bbox": _norm((100, 650, 234, 662), 1),
                                "content": [
                                    {"type": "text", "content": "Figure 2: Staff by region"}
                                ],
                            },
                        ],
                    },
                ],
            }
        ],
        "is_full_document": True,
        "schema": "docvortex.middle",
        "schema_version": "2.0",
    }


def legacy_middle(version: str) -> dict:
    """``<stem>_middle.json`` of magic-pdf 1.x / MinerU 2.x-3.x: ``pdf_info`` pages, boxes in points."""
    return {
        "pdf_info": [
            {
                "page_idx": 0,
                "page_size": [W, H],
                "para_blocks": [
                    {
                        "type": "title",
                        "bbox": [72, 57, 368, 75],
                        "lines": [{"spans": [{"type": "text", "content": "Report"}]}],
                    },
                    {
                        "type": "table",
                        "bbox": list(TABLE_PT),
                        "blocks": [
                            {
                                "type": "table_caption",
                                "bbox": [72, 203, 230, 214],
                                "lines": [
                                    {
                                        "spans": [
                                            {
                                                "type": "text",
                                                "content": "Table 1: Revenue by region",
                                            }
                                        ]
                                    }
                                ],
                            },
                            {
                                "type": "table_body",
                                "bbox": list(TABLE_PT),
                                "lines": [
                                    {
                                        "spans": [
                                            {
                                                "type": "table",
                                                "html": TABLE_HTML,
                                                "image_path": "t.jpg",
                                            }
                                        ]
                                    }
                                ],
                            },
                        ],
                    },
                    {
                        "type": "image",
                        "bbox": list(CHART_PT),
                        "blocks": [
                            {
                                "type": "image_body",
                                "bbox": list(CHART_PT),
                                "lines": [{"spans": [{"type": "image", "image_path": "c.jpg"}]}],
                            },
                            {
                                "type": "image_caption",
                                "bbox": [100, 650, 234, 662],
                                "lines": [
                                    {
                                        "spans": [
                                            {"type": "text", "content": "Figure 2: Staff by region"}
                                        ]
                                    }
                                ],
                            },
                        ],
                    },
                    {
                        "type": "interline_equation",
                        "bbox": [200, 700, 400, 720],
                        "lines": [
                            {"spans": [{"type": "interline_equation", "content": "E = mc^2"}]}
                        ],
                    },
                ],
                "discarded_blocks": [],
            }
        ],
        "_backend": "pipeline",
        "_version_name": version,
    }


def content_list_v2x() -> list[dict]:
    """``<stem>_content_list.json`` of MinerU 2.x/3.x: bbox on a 0-1000 grid."""
    return [
        {
            "type": "text",
            "text": "Report",
            "text_level": 1,
            "bbox": [int(v) for v in _norm((72, 57, 368, 75), 1000)],
            "page_idx": 0,
        },
        {
            "type": "table",
            "img_path": "images/t.jpg",
            "table_caption": ["Table 1: Revenue by region"],
            "table_footnote": [],
            "table_body": TABLE_HTML,
            "bbox": [round(v) for v in _norm(TABLE_PT, 1000)],
            "page_idx": 0,
        },
        {
            "type": "image",
            "img_path": "images/c.jpg",
            "image_caption": ["Figure 2: Staff by region"],
            "image_footnote": [],
            "bbox": [round(v) for v in _norm(CHART_PT, 1000)],
            "page_idx": 0,
        },
    ]


def content_list_v1x() -> list[dict]:
    """magic-pdf 1.x content list: no bbox at all."""
    return [{k: v for k, v in item.items() if k != "bbox"} for item in content_list_v2x()]


def _write(folder: Path, files: dict[str, object]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for name, data in files.items():
        (folder / name).write_text(json.dumps(data), encoding="utf-8")
    return folder


def _close(a: tuple[float, ...], b: tuple[float, ...], tol: float = 1.0) -> bool:
    return all(abs(x - y) <= tol for x, y in zip(a, b, strict=True))


def _check_page(blocks_by_page: dict, source: str, chart_kind: str) -> None:
    assert list(blocks_by_page) == [1]
    blocks = {b.kind: b for b in blocks_by_page[1]}
    table = blocks["table"]
    assert _close(table.bbox, TABLE_PT)
    assert table.caption == "Table 1: Revenue by region"
    assert table.html == TABLE_HTML
    assert "North | 1200" in table.text
    assert table.source == source and table.page == 1
    chart = blocks[chart_kind]
    assert _close(chart.bbox, CHART_PT)
    assert chart.caption == "Figure 2: Staff by region"
    assert blocks["title"].text == "Report"


def test_mineru4_zip(tmp_path: Path) -> None:
    zpath = tmp_path / "out.zip"
    with zipfile.ZipFile(zpath, "w") as zf:
        zf.writestr("middle_json.json", json.dumps(mineru4_middle()))
        zf.writestr("markdown.md", "# Report")
    _check_page(read_mineru_output(zpath), "mineru-4", "chart")


def test_mineru4_folder_and_bare_file(tmp_path: Path) -> None:
    folder = _write(tmp_path / "out", {"middle_json.json": mineru4_middle()})
    _check_page(read_mineru_output(folder), "mineru-4", "chart")
    _check_page(read_mineru_output(folder / "middle_json.json"), "mineru-4", "chart")


def test_mineru2_content_list_with_middle_sizes(tmp_path: Path) -> None:
    _write(
        tmp_path / "doc" / "auto",
        {"doc_content_list.json": content_list_v2x(), "doc_middle.json": legacy_middle("2.1.0")},
    )
    # content_list boxes are on a 0-1000 grid, so they come back within ~1 point.
    _check_page(read_mineru_output(tmp_path / "doc"), "mineru-2", "figure")


def test_magic_pdf_1x_uses_middle_json(tmp_path: Path) -> None:
    folder = _write(
        tmp_path / "doc",
        {"doc_content_list.json": content_list_v1x(), "doc_middle.json": legacy_middle("1.3.12")},
    )
    files = {p.name: json.loads(p.read_text()) for p in folder.iterdir()}
    assert detect_generation(files) == "magic-pdf-1"
    pages = read_mineru_output(folder)
    _check_page(pages, "magic-pdf-1", "figure")
    (eq,) = [b for b in pages[1] if b.kind == "equation"]
    assert eq.text == "E = mc^2"


def test_legacy_middle_alone(tmp_path: Path) -> None:
    folder = _write(tmp_path / "doc", {"doc_middle.json": legacy_middle("2.0.6")})
    _check_page(read_mineru_output(folder), "mineru-2", "figure")


def test_generation_detection() -> None:
    assert detect_generation({"middle_json.json": mineru4_middle()}) == "mineru-4"
    assert detect_generation({"x_content_list.json": content_list_v2x()}) == "mineru-2"
    assert detect_generation({"x_content_list.json": content_list_v1x()}) == "magic-pdf-1"
    with pytest.raises(IngestError, match="no MinerU"):
        detect_generation({"other.json": {}})


def test_content_list_without_middle_is_a_clear_error(tmp_path: Path) -> None:
    folder = _write(tmp_path / "doc", {"doc_content_list.json": content_list_v2x()})
    with pytest.raises(IngestError, match="_middle.json"):
        read_mineru_output(folder)


def test_missing_page_size_and_missing_path(tmp_path: Path) -> None:
    data = mineru4_middle()
    data["extensions"]["docvortex_layout"]["pages"] = []
    folder = _write(tmp_path / "m", {"middle_json.json": data})
    with pytest.raises(IngestError, match="page size"):
        read_mineru_output(folder)
    with pytest.raises(IngestError, match="not found"):
        read_mineru_output(tmp_path / "absent")
