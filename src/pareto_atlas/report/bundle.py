"""plotly.js, read from the `plotly` package's wheel (package_data/plotly.min.js) and inlined in
the page so it opens offline. The Python package is not imported: only its data file is read."""

from __future__ import annotations

import importlib.util
from functools import cache
from pathlib import Path


@cache
def plotly_js() -> str:
    spec = importlib.util.find_spec("plotly")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("the HTML atlas needs plotly.js from the `plotly` package: pip install plotly==7.1.0")
    path = Path(next(iter(spec.submodule_search_locations))) / "package_data" / "plotly.min.js"
    if not path.exists():
        raise RuntimeError(f"plotly.min.js: not found at {path} (reinstall the `plotly` package)")
    # inside an inline <script>, "</script" would end the element early
    return path.read_text(encoding="utf-8").replace("</script", "<\\/script")
