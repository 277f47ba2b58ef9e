from __future__ import annotations

from typing import ClassVar

from kvlint.rule import Rule
from kvlint.types import Finding


class Reporter:
    NAME: ClassVar[str]
    # Machine formats must print nothing but the document.
    MACHINE: ClassVar[bool] = True

    def render(self, findings: list[Finding], rules: tuple[type[Rule], ...]) -> str:
        raise NotImplementedError
