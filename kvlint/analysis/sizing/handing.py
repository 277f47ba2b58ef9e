"""What DCP size the coordinator hands each group's KV cache manager, per kind.

The coordinator builds each group's manager with the manager factory and a `dcp_world_size=` keyword: vLLM
0.27.1 hands every manager the process's DCP size, 0.29.0 a per-kind helper's answer
(`dcp_world_size_for_kv_cache_spec`, 1 for Mamba and sliding window). What a manager is handed decides both
what it allocates (kvlint.analysis.sizing.allocator) and whether its own `assert dcp_world_size == 1` can
fail (kvlint.analysis.sizing.kinds): both evaluate that keyword per kind with the tree's own code.
"""

from __future__ import annotations

import ast

from kvlint.analysis.ast_helpers import walk
from kvlint.analysis.sizing import sites
from kvlint.analysis.sizing.evaluator import Evaluator
from kvlint.analysis.sizing.program import Module, Program
from kvlint.analysis.sizing.sites import Candidate
from kvlint.analysis.sizing.values import Opaque, join
from kvlint.analysis.vocabulary import MANAGER_FACTORY

HANDED = "dcp_world_size"  # the keyword the coordinator hands a manager its DCP size by


def handing(program: Program) -> tuple[Module, Candidate, ast.expr] | None:
    """The coordinator's call of the manager factory with the DCP size it hands (upstream's core first)."""
    found = []
    for module in program.modules.values():
        if MANAGER_FACTORY not in module.text:
            continue
        for qualname, function, classes in sites.functions(module):
            for node in walk(function):
                if not (isinstance(node, ast.Call) and called_name(node) == MANAGER_FACTORY):
                    continue
                for keyword in node.keywords:
                    if keyword.arg == HANDED:
                        candidate = Candidate(module, qualname, function, classes, set(), {})
                        found.append((module, candidate, keyword.value))
    found.sort(key=lambda f: (not f[0].path.startswith("vllm/v1/core/"), f[0].path, f[2].lineno))
    return found[0] if found else None


def called_name(call: ast.Call) -> str | None:
    func = call.func
    return func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else None


def handed_value(evaluator: Evaluator, candidate: Candidate, spec, node: ast.AST):
    """The value `node` (the handed keyword) takes when the coordinator's function runs on a group of `spec`."""
    receiver = Opaque("self") if candidate.classes else None
    _, frame = evaluator.call(
        candidate.module, candidate.function, [], {}, receiver=receiver, group_spec=spec, sites={id(node): node}
    )
    values = frame.recorded.get(id(node), [])
    return join(values) if values else None


def held_values(program: Program, evaluator: Evaluator, spec, handed) -> list:
    """What a manager of a `spec` group keeps as its own DCP size when handed `handed`: the values its
    constructors assign to `self.dcp_world_size` (vLLM 0.34.0's `dcp_world_size if kv_cache_spec.dcp_sharded
    else 1`), one per constructor of the manager module that assigns it; `[handed]` where none does."""
    found = []
    for module in program.modules.values():
        if f"def {MANAGER_FACTORY}(" not in module.text:
            continue
        for _, function, classes in sites.functions(module):
            if function.name != "__init__" or not classes:
                continue
            assigned = {
                id(n.value): n.value
                for n in walk(function)
                if isinstance(n, ast.Assign) and any(_is_self_attribute(t, HANDED) for t in n.targets)
            }
            if not assigned:
                continue
            spec_parameters = [a.arg for a in function.args.args[1:] if "spec" in a.arg.lower()]
            keywords = {HANDED: handed, **{name: spec for name in spec_parameters[:1]}}
            _, frame = evaluator.call(
                module, function, [], keywords, receiver=Opaque("self"), group_spec=spec, sites=assigned
            )
            values = [v for key in assigned for v in frame.recorded.get(key, [])]
            found.append(join(values) if values else None)
    return found or [handed]


def _is_self_attribute(node: ast.expr, name: str) -> bool:
    return (
        isinstance(node, ast.Attribute)
        and node.attr == name
        and isinstance(node.value, ast.Name)
        and node.value.id == "self"
    )


def handing_site(program: Program) -> tuple[str, str]:
    """(the module defining the manager factory, "module:line" of the coordinator's handing keyword): where a
    manager constructor's DCP-size parameter comes from; ("", "") when the tree has no such handing."""
    found = handing(program)
    home = next((m.path for m in program.modules.values() if f"def {MANAGER_FACTORY}(" in m.text), "")
    if found is None or not home:
        return "", ""
    module, _, value = found
    return home, f"{module.path}:{value.lineno}"
