"""Headless Chromium for the tests that render a page (the report, pywb replay)."""

from __future__ import annotations

import os
import shutil

import pytest


def chromium_or_skip() -> str:
    """The Chromium executable; skip where it is missing, fail under CI (scripts/test.sh installs it)."""
    exe = next((shutil.which(n) for n in ("chromium", "chromium-browser", "google-chrome")
                if shutil.which(n)), None)
    if exe is None:
        if os.environ.get("CI"):
            pytest.fail("chromium is missing in CI: scripts/test.sh installs Debian's chromium")
        pytest.skip("chromium not installed (apt-get install -y chromium; scripts/test.sh does it)")
    return exe
