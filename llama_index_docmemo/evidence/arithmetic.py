"""A figure an answer computed from two of its cited figures: sum, difference, ratio, percent change.

An answer often states a figure no page does because the reader computed it ("increased by 35.8
million, from 212.5 million to 248.3 million"). Code checks the arithmetic: the figure is
*computed* when two other figures of the same answer, each stated on a page read, give it by

- a **sum** ``a + b`` or a **difference** ``|a − b|`` of like figures (``12.1%`` and ``14.3%``
  give ``2.2`` percentage points; a scale word counts: ``1.2 billion − 800 million`` gives
  ``400 million``);
- a **ratio** ``a / b`` (``1.17``, or a percentage: ``45%`` is ``0.45``);
- a **percent change** ``(b − a) / a`` (as a percentage: ``16.8%``), either direction, sign
  ignored as figures' signs are.

The computed value must round to the figure as written (its last digit's half-step, as
:mod:`.figures` matches a page's numbers). Dates and bare years are neither targets nor operands: a
year labels a figure, it is not one to compute with. Pure.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from itertools import permutations

from llama_index_docmemo.evidence.figures import Figure

_BARE_YEAR = re.compile(r"(?:1[89]|20)\d\d")

Operation = Callable[[float, float], "float | None"]
_OPERATIONS: tuple[tuple[str, str, Operation], ...] = (
    ("sum", "+", lambda a, b: a + b),
    ("difference", "−", lambda a, b: a - b),
    ("ratio", "/", lambda a, b: a / b if b else None),
    ("percent change", "→", lambda a, b: (b - a) / a if a else None),
)


@dataclass(frozen=True)
class Derivation:
    """How a figure is computed: the operation and its two operands, as the answer writes them."""

    operation: str  # "sum" | "difference" | "ratio" | "percent change"
    left: str
    right: str

    @property
    def formula(self) -> str:
        """The computation as a reader redoes it: ``difference: 248.3 million − 212.5 million``,
        ``percent change: 212.5 million → 248.3 million``."""
        symbol = next(s for name, s, _ in _OPERATIONS if name == self.operation)
        return f"{self.operation}: {self.left} {symbol} {self.right}"


def is_bare_year(text: str) -> bool:
    """Whether ``text`` is a year alone (``2023``): a label of other figures, not a quantity."""
    return _BARE_YEAR.fullmatch(text.strip().strip("()")) is not None


def _quantity(figure: Figure) -> float:
    """The figure's value as a quantity: scaled by its scale word (the second candidate value of
    :func:`~.figures.find_figures`'s numbers), a percentage as written."""
    if figure.kind == "number" and len(figure.values) > 1:
        return figure.values[1][0]
    return figure.values[0][0]


def _matches(value: float, target: Figure) -> bool:
    """Whether ``value`` rounds to one of the values the target may stand for (as written, scaled
    by its scale word, a percentage as a fraction: :class:`~.figures.Figure`)."""
    return any(
        abs(abs(value) - want) <= half_step * (1 + 1e-9) + 1e-9 * abs(want)
        for want, half_step in target.values
    )


def _computable(figure: Figure) -> bool:
    return figure.kind != "date" and bool(figure.values) and not is_bare_year(figure.text)


def _applies(operation: str, target: Figure, left: Figure, right: Figure) -> bool:
    """A sum or difference adds like to like (two percentages may give percentage points); a
    percent change is written as a percentage of two numbers; a ratio reads any two figures."""
    if operation in ("sum", "difference"):
        return left.kind == right.kind and target.kind in (left.kind, "number")
    if operation == "percent change":
        return target.kind == "percent" and left.kind == right.kind == "number"
    return True


def derive(target: Figure, operands: Sequence[Figure]) -> Derivation | None:
    """The first way (in the order of the module's list, operands in answer order) two of
    ``operands`` give ``target``, or None."""
    if not _computable(target):
        return None
    usable = [f for f in operands if _computable(f) and f.span != target.span]
    for name, _, operation in _OPERATIONS:
        for left, right in permutations(usable, 2):
            if not _applies(name, target, left, right):
                continue
            value = operation(_quantity(left), _quantity(right))
            if value is not None and _matches(value, target):
                if name == "difference" and value < 0:  # written larger first
                    left, right = right, left
                return Derivation(name, left.text, right.text)
    return None
