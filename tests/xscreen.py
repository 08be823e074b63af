"""A real X screen with a system tray for the tests that need one: Xvfb and trayer.

Offscreen Qt reports no system tray, and some of the tray app's behaviour (its window hiding
on close while the icon stays, Qt's quit asking every window first) only shows on a real
display with a real tray. ``./dev test`` installs Debian's xvfb and trayer under CI; without
them these tests skip locally and fail under ``CI=true``.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

TOOLS = ("Xvfb", "trayer")


def need_x_screen() -> None:
    """Skip (fail under CI) when Xvfb or trayer is missing."""
    missing = [tool for tool in TOOLS if shutil.which(tool) is None]
    if not missing:
        return
    why = f"{' and '.join(missing)} not found (apt install xvfb trayer)"
    if os.environ.get("CI", "").lower() in ("true", "1"):
        pytest.fail(why)
    pytest.skip(why)


def _stop(proc: subprocess.Popen[bytes]) -> None:
    proc.terminate()
    try:
        proc.wait(10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


@contextmanager
def x_screen() -> Iterator[str]:
    """Start Xvfb on a free display (it picks one: ``-displayfd``) with trayer docked at the
    top; yields the ``DISPLAY`` value; stops both by process id."""
    need_x_screen()
    read, write = os.pipe()
    xvfb = subprocess.Popen(
        ["Xvfb", "-displayfd", str(write), "-screen", "0", "1280x800x24", "-nolisten", "tcp"],
        pass_fds=(write,), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    os.close(write)
    procs = [xvfb]
    try:
        with os.fdopen(read) as pipe:
            number = pipe.readline().strip()  # written once the server accepts clients
        if not number:
            pytest.fail("Xvfb did not start")
        display = f":{number}"
        env = {**os.environ, "DISPLAY": display}
        trayer = subprocess.Popen(
            ["trayer", "--edge", "top", "--align", "right", "--widthtype", "pixel",
             "--width", "120", "--height", "28", "--SetDockType", "true"],
            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        procs.append(trayer)
        time.sleep(1.0)  # trayer claims the tray selection as it starts
        yield display
    finally:
        for proc in reversed(procs):
            _stop(proc)
