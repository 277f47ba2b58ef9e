"""Reporters turn findings into one output format each; chosen by name, all with one interface.

Only the chosen reporter's module is imported: a warm `check` pays for one format, not four.
"""

from __future__ import annotations

import importlib

from kvlint.reporters.base import Reporter

_CLASSES = {
    "full": "kvlint.reporters.text:TextReporter",
    "concise": "kvlint.reporters.text:ConciseReporter",
    "github": "kvlint.reporters.github:GithubReporter",
    "json": "kvlint.reporters.json:JsonReporter",
    "sarif": "kvlint.reporters.sarif:SarifReporter",
}
FORMATS = tuple(_CLASSES)
# The names `--format` has always taken: `text` is the full layout.
LEGACY_FORMATS = {"text": "full", "github": "github", "json": "json", "sarif": "sarif"}


def load_reporter(name: str) -> type[Reporter]:
    module, _, attribute = _CLASSES[name].partition(":")
    return getattr(importlib.import_module(module), attribute)


__all__ = ["FORMATS", "LEGACY_FORMATS", "Reporter", "load_reporter"]
