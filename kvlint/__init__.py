"""kvlint: find and fix KV-cache sizing bugs in vLLM. The names a rule module needs come from here.

A rule writes `from kvlint import Example, Rule`. The names load on first use (module `__getattr__`):
`Rule` is built on libcst, and a scan answered from the cache imports this package but never libcst.
"""

from __future__ import annotations

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (6 ms): a replayed run needs none of it

__version__ = "0.1.0"

# name -> the module that defines it
_FACADE = {
    "Rule": "kvlint.engine.rule",
    "Example": "kvlint.engine.rule",
    "Finding": "kvlint.types",
    "Fix": "kvlint.types",
    "TextEdit": "kvlint.types",
    "ImportChange": "kvlint.types",
    "Message": "kvlint.types",
    "Applicability": "kvlint.types",
    "Severity": "kvlint.types",
}

__all__ = [
    "Applicability",
    "Example",
    "Finding",
    "Fix",
    "ImportChange",
    "Message",
    "Rule",
    "Severity",
    "TextEdit",
    "__version__",
]

if TYPE_CHECKING:
    from kvlint.engine.rule import Example, Rule
    from kvlint.types import Applicability, Finding, Fix, ImportChange, Message, Severity, TextEdit


def __getattr__(name: str):
    module = _FACADE.get(name)
    if module is None:
        raise AttributeError(f"module 'kvlint' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # the next lookup is a plain attribute
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_FACADE})
