"""What a rule may read of a file before libcst parses it: the text, Python's own syntax tree, the scan's index.

A rule's `could_report` answers from this whether the file can hold one of its findings; a file no selected
rule can report in is never handed to libcst (its parse is most of a cold scan). Python's parser is an order
of magnitude faster. The tree is withheld — every rule then answers yes, and the file is linted as before —
where comparing its names with libcst's would not be exact: a file Python's parser rejects (libcst says
why), and one whose code spells identifiers outside ASCII (Python normalises those, libcst keeps them as
written).
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING

from kvlint.analysis.ast_candidates import NodesByType, nodes_by_type
from kvlint.engine.parse_guard import code_is_ascii

if TYPE_CHECKING:
    from kvlint.analysis.tree_index import TreeIndex as ProjectIndex


@dataclass
class PreParse:
    text: str
    module_path: str  # relative to the tree root, "/"-separated
    project: ProjectIndex
    settings: dict

    @cached_property
    def tree(self) -> ast.Module | None:
        """The module as Python parses it; None where a rule cannot decide from it (see the module's doc)."""
        if not code_is_ascii(self.text):
            return None
        try:
            return ast.parse(self.text)
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            return None  # libcst's parse says what is wrong, as before

    @cached_property
    def nodes(self) -> NodesByType | None:
        """The tree's nodes by class (walked once for all rules); None without a tree."""
        return nodes_by_type(self.tree) if self.tree is not None else None
