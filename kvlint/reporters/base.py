from __future__ import annotations

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

    def render(self, findings: list[Finding], rules: tuple[type[Rule], ...]) -> str:
        raise NotImplementedError
