"""The settings window's tabs, one module each (the window is :mod:`ui.settings_dialog`)."""
