from __future__ import annotations

import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(__file__))

from cdp import CDP, CHROMIUM  # noqa: E402


@pytest.fixture(scope="module")
def browser():
    if not os.path.exists(CHROMIUM):
        pytest.skip(f"{CHROMIUM} is absent: install it with `apt-get install -y chromium` to run the browser test")
    b = CDP()
    try:
        b.open_page()
        yield b
    finally:
        b.close()
