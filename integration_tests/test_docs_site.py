"""The documentation site and the demo's answer page as a newcomer opens them, offline.

The site is built as CI builds it (``mkdocs build --strict``); its pages must show no raw Sphinx
role (``:class:`...```) and load nothing from a CDN: the theme, the search and the Mermaid diagrams
are files of the site. In headless Chromium with host names resolving to nothing, the
architecture page's diagram renders (an SVG with its boxes drawn) and ``docmemo demo``'s first
answer page shows its evidence pages as thumbnails with the cited boxes drawn; every request
either page makes is a local file. ``DOCMEMO_SCREENSHOT_DIR=DIR`` keeps the screenshots.
"""

from __future__ import annotations

import io
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from chromium import BROWSER, NO_BROWSER, visit
from PIL import Image
from screenshots import box_pixels

from llama_index_docmemo import __all__ as PUBLIC
from llama_index_docmemo.demo.run import DEMO_PDF_NAME, run_demo

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parent.parent
ROLE = re.compile(r":(?:class|func|meth|mod|attr|data|exc|obj):")
CDN = re.compile(
    r"unpkg\.com|cdn\.jsdelivr\.net|cdnjs\.cloudflare\.com|fonts\.googleapis\.com"
    r"|fonts\.gstatic\.com|polyfill\.io"
)
LOADED = re.compile(r"<(?:script|img|iframe)\b[^>]*\bsrc=\"([^\"]+)\"|<link\b[^>]*\bhref=\"([^\"]+)\"")


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    pytest.importorskip("material", reason="the docs extra: pip install -e '.[docs]'")
    out = tmp_path_factory.mktemp("site")
    env = {**os.environ, "PYTHONPATH": str(ROOT), "NO_MKDOCS_2_WARNING": "1"}
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--quiet", "--site-dir", str(out)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-4000:]
    return out


def test_no_page_shows_a_sphinx_role_or_loads_from_the_network(site: Path) -> None:
    pages = sorted(site.rglob("*.html"))
    assert len(pages) > 20
    for page in pages:
        text = page.read_text(encoding="utf-8")
        assert not ROLE.search(text), (page, ROLE.search(text))
        assert not CDN.search(text), (page, CDN.search(text))
        for src, href in LOADED.findall(text):
            assert not (src or href).startswith(("http:", "https:", "//")) or href, (page, src)
        for tag in re.findall(r"<link\b[^>]*>", text):
            if 'rel="stylesheet"' in tag or 'rel="preload"' in tag:
                assert 'href="http' not in tag and 'href="//' not in tag, (page, tag)
    for style in site.rglob("*.css"):
        assert not CDN.search(style.read_text(encoding="utf-8")), style
    architecture = (site / "architecture" / "index.html").read_text(encoding="utf-8")
    assert 'src="../assets/javascripts/mermaid.min.js"' in architecture
    assert (site / "assets" / "javascripts" / "mermaid.min.js").stat().st_size > 1_000_000


def test_the_navigation_reaches_every_api_page_the_changelog_faq_and_migration(site: Path) -> None:
    home = (site / "index.html").read_text(encoding="utf-8")
    linked = set(re.findall(r'<a href="([^"]+)" class="md-nav__link', home))
    for page in ("changelog/", "faq/", "migrating/", "api/"):
        assert page in linked, page
    for name in PUBLIC:
        assert f"api/{name}/" in linked, name
        assert (site / "api" / name / "index.html").is_file()
    index = (site / "api" / "index.html").read_text(encoding="utf-8")
    assert 'href="DocMemoIndex/"' in index
    changelog = (site / "changelog" / "index.html").read_text(encoding="utf-8")
    assert "Unreleased" in changelog and "Keep a Changelog" in changelog


ARCHITECTURE_STATE = """JSON.stringify({
  hosts: [...document.querySelectorAll('div.mermaid')].map(e => {
    const r = e.getBoundingClientRect();
    return [r.left, r.top, r.width, r.height];
  }),
  raw: [...document.querySelectorAll('.mermaid')].filter(e => e.textContent.includes('flowchart'))
    .length,
})"""
"""The theme draws a diagram into a closed shadow root of a ``div.mermaid`` that replaces the
``pre.mermaid`` source: the page sees the host's box, the DOM (pierced) the SVG inside."""
ANSWER_STATE = """JSON.stringify({
  figures: [...document.querySelectorAll('.pages figure')].map(f => {
    const img = f.querySelector('img');
    const r = img ? img.getBoundingClientRect() : null;
    return {caption: f.querySelector('figcaption').innerText, complete: !!img && img.complete,
            width: img ? img.naturalWidth : 0, rect: r ? [r.left, r.top, r.width, r.height] : null};
  }),
  answer: document.querySelector('.answer').innerText,
})"""


def _keep(name: str, png: bytes) -> Image.Image:
    folder = os.environ.get("DOCMEMO_SCREENSHOT_DIR")
    if folder:
        Path(folder).mkdir(parents=True, exist_ok=True)
        (Path(folder) / name).write_bytes(png)
    image = Image.open(io.BytesIO(png))
    image.load()
    return image


def _drawn(image: Image.Image, rect: list[float]) -> int:
    """Pixels in ``rect`` of the screenshot that are not the page's white."""
    left, top, width, height = rect
    region = image.convert("L").crop((int(left), int(top), int(left + width), int(top + height)))
    return sum(1 for value in region.getdata() if value < 200)


def _walk(node: dict) -> list[dict]:
    """``node`` and every node under it, shadow roots included (a pierced DevTools DOM)."""
    found = [node]
    for child in node.get("children", []) + node.get("shadowRoots", []):
        found += _walk(child)
    return found


def _attributes(node: dict) -> dict[str, str]:
    values = node.get("attributes", [])
    return dict(zip(values[::2], values[1::2], strict=True))


def _shadow_svgs(dom: dict) -> list[dict]:
    """The SVGs inside the shadow roots of the page's ``div.mermaid`` hosts."""
    return [
        svg
        for host in _walk(dom)
        if host.get("nodeName") == "DIV" and "mermaid" in _attributes(host).get("class", "")
        for root in host.get("shadowRoots", [])
        for svg in _walk(root)
        if svg.get("nodeName", "").lower() == "svg"
    ]


def _local(requested: list[str]) -> list[str]:
    return [url for url in requested if not url.startswith(("file://", "data:"))]


@pytest.mark.skipif(BROWSER is None, reason=NO_BROWSER)
def test_the_architecture_diagram_renders_offline(site: Path, tmp_path: Path) -> None:
    page = (site / "architecture" / "index.html").as_uri()
    ready = "!!document.querySelector('div.mermaid')"
    shown = visit(page, tmp_path / "profile", ARCHITECTURE_STATE, ready=ready)
    assert _local(shown.requested) == []
    state = shown.state
    assert state["raw"] == 0, state  # no raw "flowchart" text left
    (host,) = state["hosts"]
    (diagram,) = _shadow_svgs(shown.dom)
    boxes = [n for n in _walk(diagram) if "node" in _attributes(n).get("class", "").split()]
    assert len(boxes) >= 5, len(boxes)  # the diagram's steps
    assert host[2] > 200 and host[3] > 100, host
    assert _drawn(_keep("architecture.png", shown.png), host) > 2000


@pytest.mark.skipif(BROWSER is None, reason=NO_BROWSER)
def test_the_demos_answer_page_shows_its_evidence_pages_offline(tmp_path: Path) -> None:
    (computed, *_) = run_demo(tmp_path / "cache", out=lambda line: None)
    shown = visit(computed.html.as_uri(), tmp_path / "profile", ANSWER_STATE, width=1200)
    assert _local(shown.requested) == []
    figures = shown.state["figures"]
    assert [f["caption"].split(",")[0] for f in figures] == [
        f"{DEMO_PDF_NAME} p. 6",
        f"{DEMO_PDF_NAME} p. 19",
    ]
    assert all(f["complete"] and f["width"] > 100 and f["rect"][2] > 100 for f in figures), figures
    image = _keep("answer.png", shown.png)
    for figure in figures:  # the cited boxes, as the browser shows them
        assert box_pixels(image, tuple(figure["rect"])) > 10, figure
    assert "Computed: a figure of this answer is the difference" in shown.state["answer"]
