"""A GGUF file's header: moved to spec.gguf_header (a model card is read from it, and spec imports
nothing above it); the old names stay importable from here."""

from __future__ import annotations

from pareto_atlas.spec.gguf_header import *  # noqa: F401,F403
from pareto_atlas.spec.gguf_header import GGUFHeaderError, read_header  # noqa: F401
