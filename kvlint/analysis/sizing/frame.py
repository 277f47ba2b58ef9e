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
        # name -> (site id, value): a site's value bound to a local name, recorded only once the name is read
        # on the path under evaluation (a branch that never reads it gets no size from it).
        self.pending: dict[str, tuple[int, object]] = {}
        self.setattrs: dict[str, list] = {}
        self.jumps: list[list[dict]] = []  # per enclosing loop: the states `break`/`continue` leave with

    def record(self, node: ast.AST, value) -> None:
        if id(node) in self.sites:
            self.recorded.setdefault(id(node), []).append(value)

    def defer(self, node: ast.AST, name: str) -> None:
        """`name = <site>` just ran: hold the site's value until `name` is read (or dropped when rebound)."""
        self.pending.pop(name, None)
        values = self.recorded.get(id(node))
        if values:
            self.pending[name] = (id(node), values.pop())
            if not values:
                del self.recorded[id(node)]

    def rebind(self, name: str) -> None:
        """`name` is bound again before it was read: the value it held sized nothing."""
        self.pending.pop(name, None)

    def read(self, name: str) -> None:
        held = self.pending.pop(name, None)
        if held is not None:
            self.recorded.setdefault(held[0], []).append(held[1])
