"""One running call of the sizing evaluator: its module, the kind under evaluation, what it returned and
what it recorded at the sites the analysis asked about."""

from __future__ import annotations

import ast

from kvlint.analysis.sizing.program import Module


class Frame:
    """One running call: its module, the kind under evaluation, what it returned and what it recorded."""

    def __init__(
        self, module: Module, group_spec=None, sites: dict[int, ast.AST] | None = None, layout: int | None = None
    ):
        self.module = module
        self.group_spec = group_spec
        # A known number of groups (1: a single-group config, where `cache_config.block_size` is the group's).
        self.layout = layout
        self.returns: list = []
        self.sites = sites or {}
        self.recorded: dict[int, list] = {}
        self.setattrs: dict[str, list] = {}
        self.jumps: list[list[dict]] = []  # per enclosing loop: the states `break`/`continue` leave with

    def record(self, node: ast.AST, value) -> None:
        if id(node) in self.sites:
            self.recorded.setdefault(id(node), []).append(value)
