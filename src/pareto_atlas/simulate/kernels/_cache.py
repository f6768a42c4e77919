"""Numba's on-disk cache for the kernels package, invalidated by a change to any of its files.

Numba keys a compiled function's cache to the source file of that function only: a kernel that
inlines or calls a compiled function from another file would silently run a stale copy after that
file changed. This locator gives every function of the package one stamp, the hashes of all its
files, so the package compiles (and is invalidated) as one unit, as the single file it was before.
"""

from __future__ import annotations

import hashlib
from functools import lru_cache
from pathlib import Path

HERE = Path(__file__).resolve().parent

try:  # numba internals; without them the kernels compile in every process instead (see CACHE)
    from numba.core import caching as _caching
    from numba.core.caching import _CacheLocator

    _CacheImpl = getattr(_caching, "CacheImpl", None) or getattr(_caching, "_CacheImpl", None)
except ImportError:  # pragma: no cover - depends on the installed numba
    _CacheImpl = None


def package_stamp() -> str:
    """One hash of every source file of the package (their names and contents)."""
    files = sorted(HERE.glob("*.py"))
    return _stamp(tuple((f, f.stat().st_mtime_ns, f.stat().st_size) for f in files))


@lru_cache(maxsize=8)
def _stamp(files: tuple) -> str:
    # keyed by the files' times and sizes: a file changed while the process runs is hashed again
    d = hashlib.sha256()
    for f, _, _ in files:
        d.update(f.name.encode())
        d.update(f.read_bytes())
    return d.hexdigest()


if _CacheImpl is not None:

    class PackageLocator(_CacheLocator):
        """Numba's own locator for the file (where the cache lives), with the package's stamp."""

        def __init__(self, inner: _CacheLocator):
            self._inner = inner

        def get_cache_path(self) -> str:
            return self._inner.get_cache_path()

        def get_source_stamp(self) -> str:
            return package_stamp()

        def get_disambiguator(self) -> str:
            return self._inner.get_disambiguator()

        @classmethod
        def from_function(cls, py_func, py_file):
            if Path(py_file).resolve().parent != HERE:
                return None
            for other in _CacheImpl._locator_classes:
                if other is not cls:
                    inner = other.from_function(py_func, py_file)
                    if inner is not None:
                        return cls(inner)
            return None

    if PackageLocator not in _CacheImpl._locator_classes:
        _CacheImpl._locator_classes.insert(0, PackageLocator)

# Cache to disk only where a change to one file invalidates them all.
CACHE = _CacheImpl is not None
