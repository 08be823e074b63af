"""The ``lexmem`` command: the core's CLI plus the desktop app.

The core (``lexmem.cli``) never imports the desktop layer; this launcher adds the
``app`` command to it, so that ``lexmem`` with a display opens the app and every
other command stays as the core defines it. Qt is imported only when the app starts.
"""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Sequence

import click

from lexmem.cli import Ctx, cli, has_display, reader_setup
from lexmem.cli import main as cli_main

__all__ = ["app", "main"]


@click.command()
@click.option(
    "--theme", type=click.Choice(["system", "light", "dark"]), help="Override the theme setting."
)
@click.option(
    "--show/--tray", "show", default=None,
    help="Open the memory browser at once (default: only when there is no system tray).",
)  # fmt: skip
@click.pass_context
def app(ctx: click.Context, theme: str | None, show: bool | None) -> None:
    """Open the desktop app: tray icon, memory browser and the capture service."""
    if not has_display() and not os.environ.get("QT_QPA_PLATFORM"):
        raise click.ClickException(
            "no display to open the app on (DISPLAY and WAYLAND_DISPLAY are unset); "
            "`lexmem serve` captures without one"
        )
    missing = [m for m in ("PySide6", "qasync") if importlib.util.find_spec(m) is None]
    if missing:
        raise click.ClickException(
            f"the desktop app needs {' and '.join(missing)}: pip install 'lexmem'"
        )
    from .start import main as run_app

    obj = ctx.find_object(Ctx)
    ctx.exit(run_app(home=obj.home if obj else None, theme=theme, show_window=show,
                     readers=reader_setup))  # fmt: skip


def main(argv: Sequence[str] | None = None) -> None:
    """Console entry point of ``lexmem``."""
    if "app" not in cli.commands:
        cli.add_command(app)
    cli_main(argv)
