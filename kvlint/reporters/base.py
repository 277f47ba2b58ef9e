from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, ClassVar

from kvlint.types import Finding

if TYPE_CHECKING:
    from kvlint.engine.rule import Rule


class Reporter:
    NAME: ClassVar[str]
    # Machine formats must print nothing but the document.
    MACHINE: ClassVar[bool] = True
    # Whether `render` reads the rules' documentation; the others get no rules, so that a scan answered
    # from the cache need not import them.
    USES_RULE_DOCS: ClassVar[bool] = False

    def __init__(self, base: Path | None = None):
        # Where a human format shows paths from (the working folder, a release's root); machine formats
        # keep every path as the scan gave it.
        self.base = base

    def render(self, findings: list[Finding], rules: tuple[type[Rule], ...]) -> str:
        raise NotImplementedError
