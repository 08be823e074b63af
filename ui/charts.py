"""Small charts drawn with QPainter: stacked columns per day and horizontal bars.

Constraint: QtCharts lives in PySide6-Addons, which lexmem does not ship (the
Essentials wheel is a third of the size), so the few charts the insights tab needs
are painted here. Colours come from the palette at paint time, so a theme change
repaints them right in light and dark without any wiring.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from PySide6.QtCore import QEvent, QPointF, QRectF, QSize, Qt
from PySide6.QtGui import (
    QColor,
    QFontMetrics,
    QFontMetricsF,
    QHelpEvent,
    QPainter,
    QPaintEvent,
    QPalette,
)
from PySide6.QtWidgets import QSizePolicy, QToolTip, QWidget

from .theme import series_colour

__all__ = ["Chart", "HorizontalBarChart", "Series", "StackedBarChart", "nice_ticks"]

_PAD = 12  # inside the card, around everything
_GAP = 8  # between title, legend and plot
_BAR_ROOM = 90  # the least a horizontal bar chart keeps for its bars: labels give way below it
_LABEL_GAP = 8  # between a bar's label and the bar


@dataclass(frozen=True, slots=True)
class Series:
    """One stacked layer: a name for the legend, one value per category, a colour."""

    name: str
    values: Sequence[int]
    colour: QColor


def nice_ticks(maximum: float, most: int = 5) -> list[int]:
    """Whole-number axis ticks from 0 covering ``maximum``: steps of 1, 2 or 5 × 10ⁿ."""
    if maximum <= 0:
        return [0, 1]
    raw = maximum / most
    power = 10 ** math.floor(math.log10(raw)) if raw >= 1 else 1
    step = next(m * power for m in (1, 2, 5, 10) if m * power >= raw)
    top = int(math.ceil(maximum / step) * step)
    return list(range(0, top + 1, int(step)))


class Chart(QWidget):
    """A card with a title, and an empty-state line when there is nothing to draw."""

    def __init__(
        self, title: str = "", *, empty_text: str = "No memories yet", parent: QWidget | None = None
    ) -> None:
        super().__init__(parent)
        self._title = title
        self._empty_text = empty_text
        self.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Expanding)
        self.setMinimumSize(260, 180)

    # -- what subclasses provide --------------------------------------------------------

    def is_empty(self) -> bool:
        return True

    def paint_plot(self, p: QPainter, area: QRectF) -> None:
        """Draw the data inside ``area`` (the card minus padding and title)."""

    # -- shared -------------------------------------------------------------------------

    @property
    def title(self) -> str:
        return self._title

    def set_title(self, title: str) -> None:
        self._title = title
        self.update()

    def set_empty_text(self, text: str) -> None:
        self._empty_text = text
        self.update()

    def sizeHint(self) -> QSize:
        return QSize(420, 260)

    def text_colour(self, alpha: int = 255) -> QColor:
        c = QColor(self.palette().color(QPalette.ColorRole.WindowText))
        c.setAlpha(alpha)
        return c

    def paintEvent(self, event: QPaintEvent) -> None:
        p = QPainter(self)
        try:
            p.setRenderHint(QPainter.RenderHint.Antialiasing)
            card = QRectF(self.rect()).adjusted(0.5, 0.5, -0.5, -0.5)
            p.setPen(self.text_colour(36))
            p.setBrush(self.palette().color(QPalette.ColorRole.Base))
            p.drawRoundedRect(card, 6, 6)
            inner = card.adjusted(_PAD, _PAD, -_PAD, -_PAD)
            if self._title:
                font = p.font()
                font.setBold(True)
                p.setFont(font)
                p.setPen(self.text_colour())
                h = QFontMetrics(font).height()
                p.drawText(
                    QRectF(inner.left(), inner.top(), inner.width(), h),
                    Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignVCenter,
                    self._title,
                )
                font.setBold(False)
                p.setFont(font)
                inner.setTop(inner.top() + h + _GAP)
            if self.is_empty():
                p.setPen(self.palette().color(QPalette.ColorRole.PlaceholderText))
                p.drawText(inner, Qt.AlignmentFlag.AlignCenter, self._empty_text)
            else:
                self.paint_plot(p, inner)
        finally:
            p.end()


class StackedBarChart(Chart):
    """One column per category (a day), its series stacked bottom-up, a legend above."""

    def __init__(
        self, title: str = "", *, empty_text: str = "No memories yet", parent: QWidget | None = None
    ) -> None:
        super().__init__(title, empty_text=empty_text, parent=parent)
        self._categories: list[str] = []
        self._tips: list[str] = []
        self._series: list[Series] = []
        self._slots: list[QRectF] = []  # where each category was drawn, for tooltips

    @property
    def categories(self) -> list[str]:
        return list(self._categories)

    @property
    def series(self) -> list[Series]:
        return list(self._series)

    def set_data(
        self,
        categories: Sequence[str],
        series: Sequence[Series],
        *,
        tooltips: Sequence[str] | None = None,
    ) -> None:
        """``categories`` label the x axis (some are left out when space is short);
        ``tooltips`` name each category in full when hovered (defaults to the label)."""
        for s in series:
            if len(s.values) != len(categories):
                raise ValueError(
                    f"series {s.name!r} has {len(s.values)} values, not {len(categories)}"
                )
        self._categories = list(categories)
        self._tips = list(tooltips) if tooltips is not None else list(categories)
        self._series = list(series)
        self._slots = []
        self.update()

    def totals(self) -> list[int]:
        return [sum(int(s.values[i]) for s in self._series) for i in range(len(self._categories))]

    def is_empty(self) -> bool:
        return not self._categories or not any(self.totals())

    def _legend(self, p: QPainter, area: QRectF) -> float:
        """Draw the legend in rows across the top of ``area``; returns the height used."""
        fm = QFontMetrics(p.font())
        sw = fm.height() * 0.7
        x, y = area.left(), area.top()
        for s in self._series:
            if not any(s.values):
                continue
            w = sw + 4 + fm.horizontalAdvance(s.name) + 14
            if x > area.left() and x + w > area.right():
                x, y = area.left(), y + fm.height() + 2
            p.setPen(Qt.PenStyle.NoPen)
            p.setBrush(s.colour)
            p.drawRoundedRect(QRectF(x, y + (fm.height() - sw) / 2, sw, sw), 2, 2)
            p.setPen(self.text_colour(220))
            p.drawText(QPointF(x + sw + 4, y + fm.ascent()), s.name)
            x += w
        return y + fm.height() - area.top()

    def paint_plot(self, p: QPainter, area: QRectF) -> None:
        fm = QFontMetrics(p.font())
        top = area.top() + self._legend(p, area) + _GAP
        ticks = nice_ticks(max(self.totals()))
        label_w = max(fm.horizontalAdvance(str(t)) for t in ticks) + 6
        plot = QRectF(area.left() + label_w, top, area.width() - label_w, 0)
        plot.setBottom(area.bottom() - fm.height() - 4)
        if plot.height() < 20 or plot.width() < 20:
            return
        top_value = ticks[-1]

        def y_of(v: float) -> float:
            return plot.bottom() - plot.height() * v / top_value

        # Grid and y labels.
        for t in ticks:
            y = y_of(t)
            p.setPen(self.text_colour(110 if t == 0 else 34))
            p.drawLine(QPointF(plot.left(), y), QPointF(plot.right(), y))
            p.setPen(self.text_colour(170))
            p.drawText(
                QRectF(area.left(), y - fm.height() / 2, label_w - 6, fm.height()),
                Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter,
                str(t),
            )
        # Columns, stacked bottom-up in series order.
        n = len(self._categories)
        slot = plot.width() / n
        bar = max(1.0, slot * 0.72)
        self._slots = []
        p.setPen(Qt.PenStyle.NoPen)
        for i in range(n):
            x = plot.left() + slot * i + (slot - bar) / 2
            base = 0
            for s in self._series:
                v = int(s.values[i])
                if v <= 0:
                    continue
                p.setBrush(s.colour)
                p.drawRect(QRectF(x, y_of(base + v), bar, y_of(base) - y_of(base + v)))
                base += v
            self._slots.append(QRectF(plot.left() + slot * i, plot.top(), slot, plot.height()))
        # x labels: every k-th counted back from the last (today), none overlapping.
        widest = max(fm.horizontalAdvance(c) for c in self._categories) + 10
        every = max(1, math.ceil(widest / slot))
        p.setPen(self.text_colour(170))
        room_right = area.right()
        for i in range(n - 1, -1, -1):
            if (n - 1 - i) % every:
                continue
            cx = plot.left() + slot * (i + 0.5)
            box = QRectF(cx - widest / 2, plot.bottom() + 4, widest, fm.height())
            box.moveLeft(min(max(box.left(), area.left()), room_right - widest))
            if box.left() < area.left() - 0.5:
                break
            p.drawText(box, Qt.AlignmentFlag.AlignCenter, self._categories[i])
            room_right = box.left()

    def event(self, e: QEvent) -> bool:
        if e.type() == QEvent.Type.ToolTip and isinstance(e, QHelpEvent):
            pos = QPointF(e.pos())
            for i, box in enumerate(self._slots):
                if box.contains(pos) and i < len(self._tips):
                    lines = [f"<b>{self._tips[i]}</b>"]
                    lines += [f"{s.name}: {s.values[i]}" for s in self._series if s.values[i]]
                    if len(lines) == 1:
                        lines.append("nothing")
                    QToolTip.showText(e.globalPos(), "<br>".join(lines), self)
                    return True
            QToolTip.hideText()
            e.ignore()
            return True
        return super().event(e)


class HorizontalBarChart(Chart):
    """One labelled bar per item, longest first as given, the value at the bar's end.

    The labels get the width the widest needs; only when the card is too narrow to keep
    :data:`_BAR_ROOM` for the bars beside them are they elided (the tooltip names each
    in full), and the card asks the layout for that width first (:meth:`minimumSizeHint`).
    """

    def __init__(
        self,
        title: str = "",
        *,
        empty_text: str = "No memories yet",
        colour: QColor | None = None,
        parent: QWidget | None = None,
    ) -> None:
        super().__init__(title, empty_text=empty_text, parent=parent)
        self._items: list[tuple[str, int]] = []
        self._tips: list[str] = []
        self._colour = colour
        self._rows: list[QRectF] = []

    @property
    def items(self) -> list[tuple[str, int]]:
        return list(self._items)

    def set_data(
        self, items: Sequence[tuple[str, int]], *, tooltips: Sequence[str] | None = None
    ) -> None:
        self._items = [(str(k), int(v)) for k, v in items]
        self._tips = list(tooltips) if tooltips is not None else [k for k, _ in self._items]
        self._rows = []
        self.updateGeometry()
        self.update()

    def is_empty(self) -> bool:
        return not any(v for _, v in self._items)

    def sizeHint(self) -> QSize:
        row = QFontMetrics(self.font()).height() + 10
        wide = 2 * _PAD + sum(self._widths(QFontMetricsF(self.font()))) + _BAR_ROOM
        return QSize(max(420, wide), max(180, 2 * _PAD + row * (len(self._items) + 1) + _GAP))

    def minimumSizeHint(self) -> QSize:
        # Whole labels up to a generous width before the layout may squeeze the card.
        labels, values = self._widths(QFontMetricsF(self.font()))
        wide = 2 * _PAD + min(labels, 360) + values + _BAR_ROOM
        return QSize(max(self.minimumWidth(), wide), self.minimumHeight())

    def _widths(self, fm: QFontMetricsF) -> tuple[int, int]:
        """The room the widest label and the widest value need, whole pixels up."""
        if not self._items:
            return 0, 0
        labels = max(fm.horizontalAdvance(k) for k, _ in self._items) + _LABEL_GAP
        values = max(fm.horizontalAdvance(str(v)) for _, v in self._items) + 8
        return math.ceil(labels), math.ceil(values)

    def paint_plot(self, p: QPainter, area: QRectF) -> None:
        fm = QFontMetricsF(p.font())
        n = len(self._items)
        row = min(fm.height() + 12, area.height() / n)
        labels, value_w = self._widths(fm)
        label_w = min(labels, max(area.width() - value_w - _BAR_ROOM, area.width() / 4))
        bar_left = area.left() + label_w
        bar_room = max(1.0, area.right() - value_w - bar_left)
        biggest = max(v for _, v in self._items)
        colour = self._colour or series_colour(0)
        self._rows = []
        for i, (label, value) in enumerate(self._items):
            y = area.top() + row * i
            box = QRectF(area.left(), y, label_w - _LABEL_GAP, row)
            p.setPen(self.text_colour(220))
            p.drawText(
                box,
                Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter,
                # Measured in fractions: a label cut to whole pixels lost its last letters.
                fm.elidedText(label, Qt.TextElideMode.ElideRight, box.width() + 0.5),
            )
            w = bar_room * value / biggest if biggest else 0.0
            h = max(2.0, row - 8)
            p.setPen(Qt.PenStyle.NoPen)
            p.setBrush(colour)
            p.drawRoundedRect(QRectF(bar_left, y + (row - h) / 2, max(w, 1.0), h), 2, 2)
            p.setPen(self.text_colour(170))
            p.drawText(
                QRectF(bar_left + w + 4, y, value_w, row),
                Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignVCenter,
                str(value),
            )
            self._rows.append(QRectF(area.left(), y, area.width(), row))

    def event(self, e: QEvent) -> bool:
        if e.type() == QEvent.Type.ToolTip and isinstance(e, QHelpEvent):
            pos = QPointF(e.pos())
            for i, box in enumerate(self._rows):
                if box.contains(pos) and i < len(self._tips):
                    QToolTip.showText(e.globalPos(), f"{self._tips[i]}: {self._items[i][1]}", self)
                    return True
            QToolTip.hideText()
            e.ignore()
            return True
        return super().event(e)
