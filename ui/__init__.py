"""lexmem's desktop layer (PySide6 + qasync): the tray app and the memory browser.

It calls the core's public API only (``lexmem.api``), never the store directly,
and never blocks the Qt event loop.
"""
