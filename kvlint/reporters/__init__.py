"""Reporters turn findings into one output format each; chosen by name, all with one interface.

Only the chosen reporter's module is imported: a warm `check` pays for one format, not four.
"""

from __future__ import annotations

import importlib

from kvlint.reporters.base import Reporter

_CLASSES = {
    "github": "kvlint.reporters.github:GithubReporter",
    "json": "kvlint.reporters.json:JsonReporter",
    "sarif": "kvlint.reporters.sarif:SarifReporter",
    "text": "kvlint.reporters.text:TextReporter",
}
FORMATS = tuple(sorted(_CLASSES))


def load_reporter(name: str) -> type[Reporter]:
    module, _, attribute = _CLASSES[name].partition(":")
    return getattr(importlib.import_module(module), attribute)


__all__ = ["FORMATS", "Reporter", "load_reporter"]
