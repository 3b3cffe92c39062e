"""Package faces that cost nothing: a stage package's `__init__.py` names its public API, and each name is imported
from its file only when asked for (PEP 562), so importing one file never imports its siblings. The converter
runtimes import `tasks.core` and `tasks.convert` with numpy alone, and the DAG file parses without the measuring
code."""

from __future__ import annotations

import importlib
from collections.abc import Callable


def lazy_exports(package: str, exports: dict[str, str]) -> tuple[Callable[[str], object], Callable[[], list[str]]]:
    """`__getattr__` and `__dir__` for the face of `package`: name -> the file (module name) that defines it."""

    def __getattr__(name: str) -> object:
        if name not in exports:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        return getattr(importlib.import_module(f"{package}.{exports[name]}"), name)

    def __dir__() -> list[str]:
        return sorted(exports)

    return __getattr__, __dir__
