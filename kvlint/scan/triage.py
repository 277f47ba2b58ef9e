"""Which changed files some rule could report in, judged from their text before any parse.

With the rules' TRIGGERS remembered by the result cache (the same kvlint sources wrote them), a file that
holds none of them is settled without importing the rules — and libcst with them. Otherwise the rules
are imported and their own `could_match` decides.
"""

from __future__ import annotations

import enum
from typing import TYPE_CHECKING

from kvlint.engine.prefilter import Triggers, triggers_match
from kvlint.engine.registry import rules_for_codes
from kvlint.engine.source import MAX_FILE_BYTES, decode_source
from kvlint.errors import UnreadableSource

if TYPE_CHECKING:
    from kvlint.engine.rule import Rule


class Verdict(enum.Enum):
    PARSE = "parse"  # some rule's prefilter accepts the file: parse and lint it
    NOTHING_TO_REPORT = "nothing to report"  # no rule's prefilter accepts it: settled without a parse
    DIAGNOSE = "diagnose"  # the engine must say why it cannot read the file (too large, undecodable)


class Triage:
    """The verdicts of one scan; loads the rules at most once, and only when the remembered triggers cannot decide."""

    def __init__(self, codes: tuple[str, ...], remembered: dict[str, Triggers] | None):
        self.codes = codes
        self.triggers = remembered if remembered is not None and all(code in remembered for code in codes) else None
        self.rules: dict[str, type[Rule]] | None = None

    def verdict(self, codes: tuple[str, ...], data: bytes) -> Verdict:
        if len(data) > MAX_FILE_BYTES:
            return Verdict.DIAGNOSE
        try:
            text = decode_source(data).text
        except UnreadableSource:
            return Verdict.DIAGNOSE
        if self.triggers is not None and not any(triggers_match(self.triggers[code], text) for code in codes):
            return Verdict.NOTHING_TO_REPORT
        rules = self._load_rules()
        if any(rules[code].could_match(text) for code in codes):  # engine-only rules declare no triggers
            return Verdict.PARSE
        return Verdict.NOTHING_TO_REPORT

    def triggers_to_remember(self) -> dict[str, Triggers] | None:
        """The rules' TRIGGERS, for the cache to remember; None when the rules were never loaded."""
        if self.rules is None:
            return None
        return {code: tuple(rule.TRIGGERS) for code, rule in self.rules.items()}

    def _load_rules(self) -> dict[str, type[Rule]]:
        if self.rules is None:
            self.rules = {rule.CODE: rule for rule in rules_for_codes(self.codes)}
        return self.rules
