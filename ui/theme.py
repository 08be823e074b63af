"""Icons, the light and dark themes, and the colours charts and chips use.

``system`` follows the desktop's colour scheme (Qt's style hints); ``light`` and
``dark`` force one. Icons and style sheets ship in ``lexmem_resources``.
"""

from __future__ import annotations

from functools import cache
from importlib.resources import files
from pathlib import Path

from PySide6.QtCore import QRectF, Qt
from PySide6.QtGui import (
    QColor,
    QFont,
    QFontMetricsF,
    QGuiApplication,
    QIcon,
    QPainter,
    QPalette,
    QPen,
    QPixmap,
)
from PySide6.QtSvg import QSvgRenderer
from PySide6.QtWidgets import QApplication

__all__ = [
    "TYPE_COLOURS",
    "apply_theme",
    "current_theme",
    "icon",
    "series_colour",
    "tray_icon",
]

THEMES = ("system", "light", "dark")
TRAY_STATES = ("capturing", "paused", "off", "error")

# One colour per memory type and per chart series, readable on both themes.
TYPE_COLOURS = {"semantic": "#4c6ef5", "episodic": "#12b886", "procedural": "#f59f00"}
_SERIES = ["#4c6ef5", "#12b886", "#f59f00", "#e64980", "#7950f2", "#15aabf", "#82c91e", "#fd7e14"]

# The theme in effect (charts pick colours by it); set only by apply_theme.
_state = {"active": "light"}


def series_colour(i: int) -> QColor:
    return QColor(_SERIES[i % len(_SERIES)])


def _resource(*parts: str) -> bytes:
    return files("lexmem_resources").joinpath(*parts).read_bytes()


@cache
def _svg(name: str) -> QSvgRenderer:
    return QSvgRenderer(_resource("icons", f"{name}.svg"))


def _pixmap(name: str, size: int) -> QPixmap:
    pm = QPixmap(size, size)
    pm.fill(Qt.GlobalColor.transparent)
    p = QPainter(pm)
    p.setRenderHint(QPainter.RenderHint.Antialiasing)
    _svg(name).render(p, QRectF(0, 0, size, size))
    p.end()
    return pm


def icon(name: str) -> QIcon:
    """An icon from ``resources/icons`` (``lexmem``, ``tray-capturing`` …)."""
    out = QIcon()
    for size in (16, 22, 24, 32, 48, 64):
        out.addPixmap(_pixmap(name, size))
    return out


def tray_icon(state: str, review_count: int = 0) -> QIcon:
    """The tray icon for a capture state, with the review count as a badge."""
    if state not in TRAY_STATES:
        raise ValueError(f"unknown tray state {state!r}")
    out = QIcon()
    for size in (16, 22, 24, 32, 48, 64):
        pm = _pixmap(f"tray-{state}", size)
        if review_count > 0 and size >= 22:
            p = QPainter(pm)
            p.setRenderHint(QPainter.RenderHint.Antialiasing)
            text = badge_text(review_count)
            box, font = badge_geometry(size, text)
            p.setBrush(QColor("#e03131"))
            p.setPen(QPen(QColor("#ffffff"), max(1.0, size / 32)))  # apart from the icon
            p.drawRoundedRect(box, box.height() / 2, box.height() / 2)
            p.setFont(font)
            p.setPen(QColor("#ffffff"))
            p.drawText(box, Qt.AlignmentFlag.AlignCenter, text)
            p.end()
        out.addPixmap(pm)
    return out


def badge_text(count: int) -> str:
    """The review count as the tray's badge says it: a badge ~10 pixels wide holds two
    characters at most, so from 10 on it says "9+" (the menu gives the number)."""
    return str(count) if count < 10 else "9+"


def badge_geometry(size: int, text: str) -> tuple[QRectF, QFont]:
    """Where the badge sits on a ``size`` icon and its font: a pill in the top right corner,
    half the icon high, as wide as "9+" needs at a font still readable in a 22 px tray."""
    height = round(size * 0.5)
    font = badge_font(text, size - 2, pixels=max(7, int(height * 0.8)))
    advance = QFontMetricsF(font).horizontalAdvance(text)
    width = min(float(size), max(float(height), advance + height * 0.45))
    return QRectF(size - width, 0, width, height), font


def badge_font(text: str, width: float, *, pixels: int | None = None) -> QFont:
    """A bold font in which ``text`` fits across ``width`` (never below 5 px), starting
    from ``pixels`` high when given."""
    font = QFont()
    font.setBold(True)
    size = pixels if pixels is not None else max(5, int(width * 0.62))
    while True:
        font.setPixelSize(size)
        if size <= 5 or QFontMetricsF(font).horizontalAdvance(text) <= width:
            return font
        size -= 1


def _system_is_dark() -> bool:
    hints = QGuiApplication.styleHints()
    scheme = getattr(hints, "colorScheme", None)
    if scheme is not None:
        value = scheme()
        if value == Qt.ColorScheme.Dark:
            return True
        if value == Qt.ColorScheme.Light:
            return False
    window = QGuiApplication.palette().color(QPalette.ColorRole.Window)
    return window.lightness() < 128


def _dark_palette() -> QPalette:
    pal = QPalette()
    c = QColor
    for role, colour in (
        (QPalette.ColorRole.Window, c("#212529")), (QPalette.ColorRole.WindowText, c("#e9ecef")),
        (QPalette.ColorRole.Base, c("#1a1d20")), (QPalette.ColorRole.AlternateBase, c("#25292d")),
        (QPalette.ColorRole.ToolTipBase, c("#343a40")), (QPalette.ColorRole.ToolTipText, c("#f8f9fa")),
        (QPalette.ColorRole.Text, c("#e9ecef")), (QPalette.ColorRole.Button, c("#2b3035")),
        (QPalette.ColorRole.ButtonText, c("#e9ecef")), (QPalette.ColorRole.BrightText, c("#ff8787")),
        (QPalette.ColorRole.Highlight, c("#4c6ef5")), (QPalette.ColorRole.HighlightedText, c("#ffffff")),
        (QPalette.ColorRole.Link, c("#74c0fc")), (QPalette.ColorRole.PlaceholderText, c("#868e96")),
    ):  # fmt: skip
        pal.setColor(role, colour)
    for role in (
        QPalette.ColorRole.Text,
        QPalette.ColorRole.WindowText,
        QPalette.ColorRole.ButtonText,
    ):
        pal.setColor(QPalette.ColorGroup.Disabled, role, c("#6c757d"))
    return pal


def _light_palette() -> QPalette:
    pal = QPalette()
    c = QColor
    for role, colour in (
        (QPalette.ColorRole.Window, c("#f8f9fa")), (QPalette.ColorRole.WindowText, c("#212529")),
        (QPalette.ColorRole.Base, c("#ffffff")), (QPalette.ColorRole.AlternateBase, c("#f1f3f5")),
        (QPalette.ColorRole.ToolTipBase, c("#ffffff")), (QPalette.ColorRole.ToolTipText, c("#212529")),
        (QPalette.ColorRole.Text, c("#212529")), (QPalette.ColorRole.Button, c("#e9ecef")),
        (QPalette.ColorRole.ButtonText, c("#212529")), (QPalette.ColorRole.BrightText, c("#c92a2a")),
        (QPalette.ColorRole.Highlight, c("#4c6ef5")), (QPalette.ColorRole.HighlightedText, c("#ffffff")),
        (QPalette.ColorRole.Link, c("#1971c2")), (QPalette.ColorRole.PlaceholderText, c("#868e96")),
    ):  # fmt: skip
        pal.setColor(role, colour)
    for role in (
        QPalette.ColorRole.Text,
        QPalette.ColorRole.WindowText,
        QPalette.ColorRole.ButtonText,
    ):
        pal.setColor(QPalette.ColorGroup.Disabled, role, c("#adb5bd"))
    return pal


def apply_theme(app: QApplication, theme: str = "system") -> str:
    """Apply ``system``, ``light`` or ``dark``; returns the one in effect (light or dark)."""
    if theme not in THEMES:
        raise ValueError(f"theme must be one of {', '.join(THEMES)}, not {theme!r}")
    dark = _system_is_dark() if theme == "system" else theme == "dark"
    active = _state["active"] = "dark" if dark else "light"
    app.setStyle("Fusion")  # the palette applies the same on every platform
    app.setPalette(_dark_palette() if dark else _light_palette())
    sheet = _resource("themes", f"{active}.qss").decode("utf-8")
    # Style sheets name images by path: the icons folder wherever lexmem is installed.
    icons = Path(str(files("lexmem_resources").joinpath("icons"))).as_posix()
    app.setStyleSheet(sheet.replace("@ICONS@", icons))
    return active


def current_theme() -> str:
    return _state["active"]
