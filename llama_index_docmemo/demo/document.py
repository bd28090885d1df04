"""The demo document: a fictional company's annual report, generated deterministically with PyMuPDF.

Built so that the demo shows what DocMemo is for: one question needs figures from two pages far
apart (2023 on page 6, 2024 on page 19), and several distractor pages share the questions' words
(research, development, employees, plant, production) without holding the answers, so the first
retrieval is not trivially right. Everything here is plain data plus drawing; no network, no clock,
no randomness: two writes give the same bytes.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pymupdf

COMPANY = "Halvorsen Instruments ASA"
TITLE = f"{COMPANY} - Annual Report 2024"


@dataclass(frozen=True)
class DemoQuestion:
    """A question about the demo document with its expected answer and 1-based evidence pages."""

    question: str
    answer: str
    evidence_pages: tuple[int, ...]


DEMO_QUESTIONS: list[DemoQuestion] = [
    DemoQuestion(
        "What was the change in research and development spending between 2023 and 2024?",
        "increased by NOK 35.8 million (from NOK 212.5 million in 2023 to NOK 248.3 million in 2024)",
        (6, 19),
    ),
    DemoQuestion(
        "How many employees were in the Nordic region at the end of 2024?",
        "1,184",
        (11,),
    ),
    DemoQuestion(
        "When did the Tampere plant start serial production?",
        "14 March 2024",
        (9,),
    ),
]


@dataclass(frozen=True)
class _Para:
    text: str


@dataclass(frozen=True)
class _Sub:
    text: str


@dataclass(frozen=True)
class _Table:
    caption: str
    header: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]


@dataclass(frozen=True)
class _Bars:
    caption: str
    labels: tuple[str, ...]
    values: tuple[float, ...]


_Block = _Para | _Sub | _Table | _Bars


@dataclass(frozen=True)
class _Page:
    title: str
    level: int
    blocks: tuple[_Block, ...]


def _p(*texts: str) -> tuple[_Para, ...]:
    return tuple(_Para(t) for t in texts)


_PAGES: tuple[_Page, ...] = (
    _Page(
        "Annual Report 2024",
        1,
        _p(
            f"{COMPANY}",
            "Measuring what matters - sensors and instruments for process industry, shipping and "
            "laboratories since 1968.",
            "Headquarters: Lysaker, Norway. Listed on Oslo Bors under the ticker HALV.",
        ),
    ),
    _Page(
        "Contents",
        1,
        _p(
            "Letter from the Chair 3 | 2024 at a glance 4 | Our business 5 | Looking back: 2023 in "
            "review 6 | Strategy 2025-2028 7 | Markets and customers 8 | Operations 9 | Innovation "
            "and technology 10 | People and organisation 11 | Health and safety 12 | Sustainability "
            "13 | Risk management 14 | Corporate governance 15 | Board of Directors' report 16 | "
            "Financial statements 17-18 | Notes 19-22 | Auditor's report 23 | Shareholder "
            "information 24",
        ),
    ),
    _Page(
        "Letter from the Chair",
        1,
        _p(
            "Dear shareholders, 2024 was a year in which Halvorsen grew faster than its markets. "
            "Demand from process industry recovered in the second half, our marine business won "
            "its largest contract to date, and the new plant in Finland gave us the capacity we "
            "have been asking for since the pandemic.",
            "Research and development remains at the heart of what we do. The Board has supported "
            "management's decision to keep development spending high through the cycle, because "
            "our customers buy precision, and precision is earned in the laboratory long before it "
            "shows in the order book.",
            "We also made progress on safety and on our climate targets, and we welcomed many new "
            "colleagues. I want to thank every employee for their effort, and our customers and "
            "shareholders for their trust.",
            "Ingrid Solberg, Chair of the Board",
        ),
    ),
    _Page(
        "2024 at a glance",
        1,
        (
            _Para(
                "Key figures for the Group. Amounts in NOK million unless otherwise stated. The "
                "figures are taken from the consolidated financial statements on pages 17 and 18."
            ),
            _Table(
                "Table 1: Key figures",
                ("NOK million", "2024", "2023"),
                (
                    ("Revenue", "3,412", "3,186"),
                    ("EBITDA", "611", "542"),
                    ("Operating profit (EBIT)", "428", "371"),
                    ("Profit for the year", "302", "265"),
                    ("Order intake", "3,655", "3,240"),
                    ("Equity ratio (%)", "54.2", "52.8"),
                ),
            ),
            _Para(
                "Order intake exceeded revenue for the third year in a row, and the order backlog "
                "at year end was the highest in the company's history."
            ),
        ),
    ),
    _Page(
        "Our business",
        1,
        _p(
            "Halvorsen designs, manufactures and services sensors and measurement instruments. "
            "The Group is organised in three segments: Process Sensors, Marine Systems and Lab "
            "Analytics. Products are sold directly to large industrial customers and through "
            "distributors in more than forty countries.",
            "Process Sensors supplies pressure, flow and level transmitters to the chemical, pulp "
            "and paper and energy industries. Marine Systems delivers emission monitoring and "
            "tank gauging systems to ship owners and yards. Lab Analytics offers benchtop "
            "analysers and the software that manages their results.",
            "The Nordic region is our home market and the largest by revenue, but most growth now "
            "comes from the rest of Europe and North America. Service and spare parts make up a "
            "growing share of the business and smooth the cycle of new installations.",
        ),
    ),
    _Page(
        "Looking back: 2023 in review",
        1,
        _p(
            "This page summarises the previous year as reported in the Annual Report 2023, for "
            "readers who want to follow the development over time.",
            "In 2023 revenue grew by 7 per cent to NOK 3,186 million, held back by weak demand "
            "from the pulp and paper industry in the first half. The marine business had a record "
            "year for retrofits of emission monitoring systems.",
            "In 2023 the Group invested NOK 212.5 million in research and development.",
            "The programmes concentrated on the next generation of radar level sensors and on "
            "the software platform for Lab Analytics.",
            "Construction of the new plant in Finland stayed on budget during the year, and the "
            "Group signed a five-year framework agreement with a major European chemicals producer.",
        ),
    ),
    _Page(
        "Strategy 2025-2028",
        1,
        _p(
            "Our strategy has three priorities: grow service revenue, win in North America, and "
            "turn our technology lead into software and data products. Business development "
            "teams in Houston and Toronto were strengthened during the year.",
            "Product development will focus on wireless sensors, predictive maintenance and the "
            "integration of our instruments with customers' digital platforms. We expect "
            "development spending to stay between 7 and 8 per cent of revenue over the period.",
            "We will keep a disciplined approach to acquisitions and prioritise companies that "
            "bring software competence or access to new customer groups.",
        ),
    ),
    _Page(
        "Markets and customers",
        1,
        (
            _Para(
                "Revenue grew in all regions. North America was the fastest growing region, "
                "driven by new distributor agreements and the first large orders for marine "
                "emission monitoring in the United States."
            ),
            _Table(
                "Table 2: Revenue by region",
                ("NOK million", "2024", "2023"),
                (
                    ("Nordic", "1,296", "1,247"),
                    ("Rest of Europe", "1,091", "1,003"),
                    ("North America", "614", "509"),
                    ("Asia-Pacific", "411", "427"),
                    ("Total revenue", "3,412", "3,186"),
                ),
            ),
            _Bars(
                "Figure 1: Revenue by year, 2020-2024 (NOK million)",
                ("2020", "2021", "2022", "2023", "2024"),
                (2410.0, 2655.0, 2978.0, 3186.0, 3412.0),
            ),
        ),
    ),
    _Page(
        "Operations",
        1,
        _p(
            "Halvorsen has production sites in Norway, Finland and Poland. In 2024 the main "
            "operational event was the opening of the new plant in Tampere, Finland.",
            "The Tampere plant started serial production on 14 March 2024, three weeks ahead of "
            "plan. It produces radar level sensors and pressure transmitters for the European "
            "market and will employ around 180 people at full capacity.",
            "The plant in Drammen moved assembly of marine systems into a new hall, and the site in "
            "Gdansk added a second shift for printed circuit board assembly. On-time delivery "
            "improved from 88 to 93 per cent over the year.",
        ),
    ),
    _Page(
        "Innovation and technology",
        1,
        _p(
            "Research and development is organised in one technology centre in Lysaker and "
            "development teams close to each production site. Around 310 engineers and scientists "
            "work in research and development.",
            "During the year the research teams completed the radar sensor platform, filed "
            "patent applications for a new optical gas analyser, and started field tests of "
            "wireless pressure transmitters with three customers.",
            "Development work is run in stage-gated projects. Spending on each project is "
            "reviewed at every gate, and projects that no longer meet their targets are stopped.",
        ),
    ),
    _Page(
        "People and organisation",
        1,
        (
            _Para(
                "The Group grew its workforce in all regions except Asia-Pacific. Most new "
                "colleagues joined the Tampere plant and the service organisation in North America."
            ),
            _Table(
                "Table 3: Employees by region at the end of the year (headcount)",
                ("Region", "2024", "2023"),
                (
                    ("Nordic", "1,184", "1,102"),
                    ("Rest of Europe", "742", "655"),
                    ("North America", "318", "271"),
                    ("Asia-Pacific", "171", "179"),
                ),
            ),
            _Para(
                "Employee engagement, measured in the annual survey, rose to 78 points. Women "
                "held 31 per cent of management positions."
            ),
        ),
    ),
    _Page(
        "Health and safety",
        1,
        _p(
            "Safety comes first at every Halvorsen site. Production at all plants ran without "
            "serious injuries, and the lost-time injury rate fell to 1.2 per million hours worked.",
            "All production employees completed the new safety training, and near-miss reporting "
            "increased, which we see as a sign of a healthy safety culture.",
        ),
    ),
    _Page(
        "Sustainability",
        1,
        (
            _Para(
                "Our products help customers measure and reduce their emissions. In our own "
                "operations we aim to cut scope 1 and 2 emissions by 60 per cent by 2030."
            ),
            _Table(
                "Table 4: Greenhouse gas emissions (tonnes CO2e)",
                ("Scope", "2024", "2023"),
                (
                    ("Scope 1", "1,420", "1,610"),
                    ("Scope 2 (market-based)", "2,130", "2,480"),
                    ("Scope 3 (purchased goods)", "48,900", "46,300"),
                ),
            ),
        ),
    ),
    _Page(
        "Risk management",
        1,
        _p(
            "The main risks are the cycle in process industry, competition from larger "
            "instrument makers, supply of electronic components and currency movements.",
            "Component shortages eased in 2024, but the Group keeps dual sourcing for critical "
            "parts. About 70 per cent of revenue is in currencies other than the Norwegian krone.",
        ),
    ),
    _Page(
        "Corporate governance",
        1,
        _p(
            "Halvorsen follows the Norwegian Code of Practice for Corporate Governance. The Board "
            "has seven members, of whom two are elected by the employees.",
            "The audit committee met six times in 2024 and the remuneration committee four times.",
        ),
    ),
    _Page(
        "Board of Directors' report",
        1,
        _p(
            "The Board is satisfied with the development of the Group in 2024. Revenue grew by "
            "7.1 per cent and the operating margin improved to 12.5 per cent.",
            "The Board considers research and development a long-term investment. Research and "
            "development expenditure for the year is described in the notes to the accounts.",
            "The Board proposes a dividend of NOK 4.50 per share.",
        ),
    ),
    _Page(
        "Consolidated income statement",
        1,
        (
            _Table(
                "Table 5: Consolidated income statement (NOK million)",
                ("NOK million", "2024", "2023"),
                (
                    ("Revenue", "3,412", "3,186"),
                    ("Cost of materials", "-1,297", "-1,243"),
                    ("Personnel expenses", "-1,104", "-1,021"),
                    ("Other operating expenses", "-400", "-380"),
                    ("EBITDA", "611", "542"),
                    ("Depreciation and amortisation", "-183", "-171"),
                    ("Operating profit (EBIT)", "428", "371"),
                    ("Profit for the year", "302", "265"),
                ),
            ),
        ),
    ),
    _Page(
        "Consolidated statement of financial position",
        1,
        (
            _Table(
                "Table 6: Consolidated statement of financial position at 31 December",
                ("NOK million", "2024", "2023"),
                (
                    ("Intangible assets", "812", "744"),
                    ("Property, plant and equipment", "1,035", "902"),
                    ("Inventories", "598", "571"),
                    ("Trade receivables", "644", "603"),
                    ("Total assets", "3,389", "3,112"),
                    ("Total equity", "1,837", "1,643"),
                ),
            ),
        ),
    ),
    _Page(
        "Note 7 Research and development",
        2,
        (
            _Para(
                "Research and development expenditure in 2024 amounted to NOK 248.3 million, of "
                "which NOK 61.0 million was capitalised as development costs."
            ),
            _Para(
                "Research costs are expensed as incurred. Development costs are capitalised when "
                "the technical feasibility of a product is demonstrated and the Group intends and is "
                "able to complete and sell it."
            ),
            _Table(
                "Table 7: Research and development expenditure (NOK million)",
                ("NOK million", "2024"),
                (
                    ("Expensed", "187.3"),
                    ("Capitalised", "61.0"),
                    ("Total research and development", "248.3"),
                ),
            ),
        ),
    ),
    _Page(
        "Note 8 Employee benefits",
        2,
        _p(
            "Personnel expenses include salaries, social security, pensions and share-based "
            "payments. The average number of employees during the year was 2,352.",
            "All employees in Norway are members of a defined contribution pension scheme.",
        ),
    ),
    _Page(
        "Note 9 Property, plant and equipment",
        2,
        _p(
            "Property, plant and equipment is measured at cost less depreciation. Additions in "
            "2024 mainly relate to the new plant in Finland and production equipment in Poland.",
            "Buildings are depreciated over 30 years and machinery over 5 to 10 years.",
        ),
    ),
    _Page(
        "Note 10 Events after the balance sheet date",
        2,
        _p(
            "In February 2025 the Group acquired a majority stake in a Danish software company "
            "specialised in laboratory data management. No other events after the balance sheet "
            "date have a material effect on the accounts.",
        ),
    ),
    _Page(
        "Auditor's report",
        1,
        _p(
            "We have audited the financial statements of Halvorsen Instruments ASA. In our "
            "opinion the financial statements give a true and fair view of the financial position "
            "of the Group at 31 December 2024.",
            "Key audit matters: revenue recognition on long-term marine contracts and the "
            "capitalisation of development costs.",
        ),
    ),
    _Page(
        "Shareholder information",
        1,
        _p(
            "The share is listed on Oslo Bors. At year end Halvorsen had 6,912 shareholders. The "
            "annual general meeting will be held on 24 April 2025 in Lysaker.",
            "Investor relations: ir@halvorsen.example",
        ),
    ),
)

_W, _H = 595.0, 842.0  # A4 in points
_MARGIN = 64.0
_BODY = 10.5
_NAVY = (0.1, 0.2, 0.4)
_GREY = (0.45, 0.45, 0.45)


def _paragraph(
    page: pymupdf.Page, y: float, text: str, size: float = _BODY, font: str = "helv"
) -> float:
    """Write wrapped text from ``y``; return the y below it."""
    lines = _wrap(text, _W - 2 * _MARGIN, size, font)
    for line in lines:
        y += size * 1.4
        page.insert_text((_MARGIN, y), line, fontsize=size, fontname=font)
    return y + size * 0.8


def _wrap(text: str, width: float, size: float, font: str) -> list[str]:
    lines: list[str] = []
    cur = ""
    for word in text.split():
        trial = f"{cur} {word}".strip()
        if cur and pymupdf.get_text_length(trial, fontname=font, fontsize=size) > width:
            lines.append(cur)
            cur = word
        else:
            cur = trial
    return [*lines, cur] if cur else lines


def _table(page: pymupdf.Page, y: float, table: _Table) -> float:
    """A ruled grid with text cells (what ``page.find_tables()`` detects), numbers right-aligned."""
    y = _paragraph(page, y, table.caption, size=9.5, font="hebo") + 8
    n = len(table.header)
    label_w = 230.0
    col_w = (_W - 2 * _MARGIN - label_w) / max(n - 1, 1)
    xs = [_MARGIN, _MARGIN + label_w] + [_MARGIN + label_w + col_w * i for i in range(1, n)]
    row_h = 18.0
    rows = (table.header, *table.rows)
    top = y
    for r, row in enumerate(rows):
        font = "hebo" if r == 0 else "helv"
        base = top + r * row_h + 12.5
        for c, cell in enumerate(row):
            if c == 0:
                x = xs[0] + 5
            else:
                x = xs[c + 1] - 5 - pymupdf.get_text_length(cell, fontname=font, fontsize=9.5)
            page.insert_text((x, base), cell, fontsize=9.5, fontname=font)
    bottom = top + len(rows) * row_h
    for r in range(len(rows) + 1):
        page.draw_line((xs[0], top + r * row_h), (xs[-1], top + r * row_h), color=_GREY, width=0.6)
    for x in xs:
        page.draw_line((x, top), (x, bottom), color=_GREY, width=0.6)
    return bottom + 16


def _bars(page: pymupdf.Page, y: float, chart: _Bars) -> float:
    """A bar chart drawn with vector shapes, value labels above bars and a caption below."""
    height, bar_w, gap = 150.0, 48.0, 26.0
    x0, base = _MARGIN + 30, y + 20 + height
    top = max(chart.values)
    page.draw_line((x0 - 10, base), (x0 + len(chart.values) * (bar_w + gap), base), color=_GREY)
    for i, (label, value) in enumerate(zip(chart.labels, chart.values, strict=True)):
        x = x0 + i * (bar_w + gap)
        h = height * value / top
        page.draw_rect(pymupdf.Rect(x, base - h, x + bar_w, base), color=None, fill=_NAVY)
        text = f"{value:,.0f}"
        tw = pymupdf.get_text_length(text, fontname="helv", fontsize=8.5)
        page.insert_text((x + (bar_w - tw) / 2, base - h - 4), text, fontsize=8.5)
        lw = pymupdf.get_text_length(label, fontname="helv", fontsize=8.5)
        page.insert_text((x + (bar_w - lw) / 2, base + 12), label, fontsize=8.5)
    return _paragraph(page, base + 18, chart.caption, size=9, font="heit")


def _render(page: pymupdf.Page, number: int, spec: _Page) -> None:
    page.draw_rect(pymupdf.Rect(0, 0, _W, 8), color=None, fill=_NAVY)
    y = _MARGIN
    title_size = 26 if number == 1 else 17
    page.insert_text(
        (_MARGIN, y + title_size), spec.title, fontsize=title_size, fontname="hebo", color=_NAVY
    )
    y += title_size + 18
    for block in spec.blocks:
        if isinstance(block, _Para):
            y = _paragraph(page, y, block.text)
        elif isinstance(block, _Sub):
            y = _paragraph(page, y, block.text, size=12, font="hebo")
        elif isinstance(block, _Table):
            y = _table(page, y, block)
        else:
            y = _bars(page, y, block)
    if y > _H - _MARGIN:
        raise ValueError(
            f"demo page {number} ({spec.title!r}) overflows: content ends at y={y:.0f}"
        )
    footer = f"{TITLE} - {number}"
    page.insert_text((_MARGIN, _H - 30), footer, fontsize=8, color=_GREY)


def _toc() -> list[list[object]]:
    """The PDF outline: every page's title, notes nested under 'Notes to the accounts'."""
    toc: list[list[object]] = []
    for number, spec in enumerate(_PAGES, start=1):
        if spec.level == 2 and toc[-1][1] != "Notes to the accounts" and toc[-1][0] == 1:
            toc.append([1, "Notes to the accounts", number])
        toc.append([spec.level, spec.title, number])
    return toc


def write_demo_pdf(path: str | Path) -> Path:
    """Write the demo annual report to ``path`` (parents created); the bytes are reproducible."""
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    doc = pymupdf.open()
    for number, spec in enumerate(_PAGES, start=1):
        _render(doc.new_page(width=_W, height=_H), number, spec)
    doc.set_toc(_toc())
    doc.set_metadata(
        {
            "title": TITLE,
            "author": COMPANY,
            "subject": "Fictional annual report generated for the llama-index-docmemo demo",
            "creator": "llama-index-docmemo",
            "producer": "PyMuPDF",
            "creationDate": "D:20250301000000Z",
            "modDate": "D:20250301000000Z",
        }
    )
    doc.save(out, garbage=3, deflate=True, no_new_id=True)
    doc.close()
    return out
