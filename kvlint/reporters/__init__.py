"""Reporters turn findings into one output format each; chosen by name, all with one interface."""

from __future__ import annotations

from kvlint.reporters.base import Reporter
from kvlint.reporters.github import GithubReporter
from kvlint.reporters.json import JsonReporter
from kvlint.reporters.sarif import SarifReporter
from kvlint.reporters.text import TextReporter

REPORTERS: dict[str, type[Reporter]] = {
    reporter.NAME: reporter for reporter in (TextReporter, JsonReporter, SarifReporter, GithubReporter)
}

__all__ = ["REPORTERS", "Reporter"]
