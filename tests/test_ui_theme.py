"""The themes as a person sees them: what must stay visible in both."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from PySide6.QtCore import QPoint
from PySide6.QtGui import QColor
from PySide6.QtWidgets import QApplication, QCheckBox, QMenu, QStyle, QStyleOptionButton

from ui.theme import apply_theme


@pytest.fixture
def themed(qtbot: Any) -> Iterator[QApplication]:
    app = QApplication.instance()
    assert isinstance(app, QApplication)
    yield app
    app.setStyleSheet("")
    app.setPalette(app.style().standardPalette())


def _contrast(a: QColor, b: QColor) -> int:
    return max(abs(a.red() - b.red()), abs(a.green() - b.green()), abs(a.blue() - b.blue()))


def _box_edge(image: Any, rect: Any, background: QColor) -> int:
    """How far the unticked box's outline stands out from what is around it."""
    best = 0
    for x in range(rect.left(), rect.right() + 1):
        for y in range(rect.top(), rect.bottom() + 1):
            best = max(best, _contrast(image.pixelColor(x, y), background))
    return best


@pytest.mark.parametrize("theme", ["light", "dark"])
def test_an_unticked_box_can_be_seen(qtbot: Any, themed: QApplication, theme: str) -> None:
    """Issue 18: in the dark theme "Start lexmem when I log in" and an opted-out
    repository's box all but vanished (Fusion's frame is a shade darker than the window)."""
    apply_theme(themed, theme)
    box = QCheckBox("Start lexmem when I log in")
    qtbot.addWidget(box)
    box.show()
    qtbot.waitExposed(box)
    image = box.grab().toImage()
    opt = QStyleOptionButton()
    box.initStyleOption(opt)
    rect = box.style().subElementRect(QStyle.SubElement.SE_CheckBoxIndicator, opt, box)
    background = image.pixelColor(QPoint(box.width() - 2, 1))
    assert _box_edge(image, rect, background) >= 45, theme


@pytest.mark.parametrize("theme", ["light", "dark"])
def test_an_unticked_menu_item_shows_its_box(qtbot: Any, themed: QApplication, theme: str) -> None:
    apply_theme(themed, theme)
    menu = QMenu()
    qtbot.addWidget(menu)
    action = menu.addAction("novel")
    action.setCheckable(True)
    action.setChecked(False)
    menu.show()
    qtbot.waitExposed(menu)
    image = menu.grab().toImage()
    item = menu.actionGeometry(action)
    background = image.pixelColor(QPoint(item.right() - 2, item.center().y()))
    left = item.adjusted(0, 0, -(item.width() - item.height() - 12), 0)  # the box's corner
    assert _box_edge(image, left, background) >= 45, theme
