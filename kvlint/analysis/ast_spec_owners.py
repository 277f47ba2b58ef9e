"""Whose `.block_size` may be a KV cache spec's, read from Python's own syntax tree before libcst parses a file.

KV102 takes a product for a scaling only where `kvlint.analysis.scaling.spec_of_block_size` finds the block
size's owner to be a spec: its dotted text names one (`spec`, `group.kv_cache_spec`, `…kv_cache_specs[…]`),
or provenance classifies it as a group's spec or a layer's. This answers no only where neither can hold:

- an attribute or a subscript whose text names no spec (`cache_config`, `vllm_config.cache_config`):
  provenance makes a spec of an attribute only of `.kv_cache_spec`, of a subscript only of `.kv_cache_specs[…]`;
- a name none of whose bindings anywhere in the module can give one: no parameter a group's spec may reach
  (kvlint.analysis.flow.ast_group_flow, every scope at once), no `isinstance` test of it where the module names
  the container class (the branch it narrows holds a layer's spec), and no other binding of it but assignments
  of a value provenance never classifies as a layer's spec (a constant, an attribute other than
  `.kv_cache_spec`, an operation, a display).

Anything else (a call, a conditional, a name bound by a loop or `with`) may be one. tests/test_preparse.py
holds each no to what libcst's reading says of the same code.
"""

from __future__ import annotations

import ast
import re

from kvlint.analysis.flow.ast_group_flow import SPEC, group_flow
from kvlint.analysis.vocabulary import CONTAINER_CLASS

# Values provenance's `classify` gives no layer's spec, whatever they hold: it reads only attributes, subscripts,
# names, calls, conditionals and `:=` (an attribute only when it is `.kv_cache_spec`).
_NEVER_A_SPEC = (
    ast.Constant,
    ast.BinOp,
    ast.UnaryOp,
    ast.BoolOp,
    ast.Compare,
    ast.JoinedStr,
    ast.List,
    ast.Tuple,
    ast.Dict,
    ast.Set,
    ast.ListComp,
    ast.SetComp,
    ast.DictComp,
    ast.GeneratorExp,
    ast.Lambda,
    ast.Await,
)

_SPEC_ATTRIBUTE = re.compile(r"kv_cache_spec\b")


def dotted_as_libcst(node: ast.AST) -> str:
    """The text `kvlint.analysis.flow.cst_bindings.dotted` gives the same code, on `ast`: names and attribute
    chains as written, a call or a subscript marked (`x.kv_cache_specs[…]`). Not `ast_helpers.dotted`, which has
    no text for either: a subscript's "spec" counts here."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return f"{dotted_as_libcst(node.value)}.{node.attr}"
    if isinstance(node, ast.Call):
        return f"{dotted_as_libcst(node.func)}(…)"
    if isinstance(node, ast.Subscript):
        return f"{dotted_as_libcst(node.value)}[…]"
    return "…"


class SpecOwners:
    """`may_own_spec(owner)` for one module (its names' bindings read once, on the first name asked)."""

    def __init__(self, tree: ast.Module, nodes, text: str):
        self._tree, self._nodes, self._text = tree, nodes, text
        self._names: frozenset[str] | None = None

    def may_own_spec(self, owner: ast.AST) -> bool:
        if "spec" in dotted_as_libcst(owner).lower():
            return True
        if isinstance(owner, (ast.Attribute, ast.Subscript)):
            return False
        if isinstance(owner, ast.Name):
            if self._names is None:
                self._names = self._spec_names()
            return owner.id in self._names
        return True  # a call, a conditional, `:=`: provenance may classify them as either spec

    def _spec_names(self) -> frozenset[str]:
        """The names some binding in the module may make a group's spec or a layer's."""
        names: set[str] = set()
        if _SPEC_ATTRIBUTE.search(self._text):  # every group's spec the flow finds starts at a `.kv_cache_spec`
            names.update(name for (_, name), kinds in group_flow(self._tree).kinds.items() if kinds & SPEC)
        assigned: set[int] = set()  # ids of the names an assignment of a never-spec value binds
        for kind in (ast.Assign, ast.AnnAssign, ast.NamedExpr):
            for node in self._nodes.get(kind, ()):
                value = node.value
                if value is None or not _never_a_spec(value):
                    continue
                targets = node.targets if kind is ast.Assign else [node.target]
                assigned.update(id(n) for target in targets for n in ast.walk(target) if isinstance(n, ast.Name))
        # Any other binding of a name may give it a layer's spec: a loop's, `with … as`, `except … as`, `+=`, …
        names.update(
            n.id for n in self._nodes.get(ast.Name, ()) if type(n.ctx) is not ast.Load and id(n) not in assigned
        )
        for kind in (ast.MatchAs, ast.MatchStar):
            names.update(n.name for n in self._nodes.get(kind, ()) if n.name)
        if CONTAINER_CLASS in self._text:
            # `isinstance(x, …UniformTypeKVCacheSpecs…)` narrows `x` to a layer's spec where it is not one.
            for call in self._nodes.get(ast.Call, ()):
                if isinstance(call.func, ast.Name) and call.func.id == "isinstance":
                    names.update(
                        a.id for a in [*call.args, *(k.value for k in call.keywords)] if isinstance(a, ast.Name)
                    )
        return frozenset(names)


def _never_a_spec(value: ast.AST) -> bool:
    return isinstance(value, _NEVER_A_SPEC) or (isinstance(value, ast.Attribute) and value.attr != "kv_cache_spec")
