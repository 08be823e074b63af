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


@pytest.mark.parametrize("count", [1, 9, 10, 8_003])
def test_the_tray_badge_is_readable_in_a_small_tray(qtbot: Any, count: int) -> None:
    """At 22 px the badge's "9+" was 5 px high and cut by the icon's edge (issue 18): the
    badge is a pill inside the icon, its text at least 7 px high with room around it."""
    from PySide6.QtGui import QFontMetricsF

    from ui.theme import badge_geometry, badge_text

    text = badge_text(count)
    for size in (22, 24, 32, 48, 64):
        box, font = badge_geometry(size, text)
        assert box.left() >= 0 and box.right() <= size and box.top() >= 0, (size, box)
        assert box.bottom() <= size
        assert font.pixelSize() >= 7, (size, font.pixelSize())
        assert QFontMetricsF(font).horizontalAdvance(text) <= box.width() - 2, (size, text)
