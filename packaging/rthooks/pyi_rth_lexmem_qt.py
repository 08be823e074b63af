"""Runtime hook of the Linux bundle: Qt's plugin path, set without importing Qt.

PyInstaller's own runtime hook for PySide6 also registers an embedded qt.conf, for which
it imports PySide6.QtCore at every start: Qt and ICU load (~100 ms) into
`lexmem --version`, every command and the MCP server, none of which use Qt. On Linux the
bundle keeps the wheel's layout (PySide6/Qt/lib beside PySide6/Qt/plugins), so Qt finds
its prefix from its own library without a qt.conf; what remains is the plugin path, set
here so that a desktop session's QT_PLUGIN_PATH (a system Qt's plugins, built against
another Qt) is never loaded into the bundle's Qt.
"""


def _pyi_rthook() -> None:
    import os
    import sys

    os.environ["QT_PLUGIN_PATH"] = os.path.join(sys._MEIPASS, "PySide6", "Qt", "plugins")


_pyi_rthook()
del _pyi_rthook
