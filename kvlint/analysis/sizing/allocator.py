"""What the KV cache managers allocate: the yardstick of a tree without the shared resolver (vLLM < 0.29).

Before `resolve_dcp_kv_block_size` existed, what a group's block spans was decided by its manager, not by
the scheduler's `resolve_kv_cache_block_sizes`: the coordinator hands each group's manager a DCP size (the
`dcp_world_size=` of its call to the manager factory — vLLM 0.27.1 hands every manager the plain size,
0.29.0 a per-kind helper's answer), and the manager scales its block size by what it is handed (`if
dcp_world_size > 1: self.block_size *= dcp_world_size`). Both are evaluated per kind with the tree's own
code (the scheduler's view: the coordinator sees flattened groups). Code that agrees with the managers
sizes what vLLM allocates; a manager that disagrees with `resolve_kv_cache_block_sizes` is the defect.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

from kvlint.analysis.ast_helpers import dotted
from kvlint.analysis.sizing import sites
from kvlint.analysis.sizing.evaluator import Evaluator
from kvlint.analysis.sizing.handing import called_name, handed_value, handing
from kvlint.analysis.sizing.kinds import SpecKind
from kvlint.analysis.sizing.program import Program
from kvlint.analysis.sizing.results import SizingPath
from kvlint.analysis.sizing.sites import Candidate
from kvlint.analysis.sizing.values import BLOCK_SIZE, Opaque, join, known_number
from kvlint.analysis.vocabulary import MANAGER_FACTORY, is_dcp_name


@dataclass(frozen=True)
class Allocation:
    """The managers' factor per kind, and where it is decided."""

    manager: Candidate  # the manager constructor that scales its block size
    handed_at: str  # "module.py:line" of the coordinator's call that hands the DCP size
    handed: str  # what it hands, as written (`dcp_world_size`, `dcp_world_size_for_kv_cache_spec(…)`)
    factors: tuple[str, ...]  # per kind: "dcp", "1" or "?"
    # Per kind: the constructor whose code keeps its block size when a manager class the kind maps to resets
    # what the scaling manager set (vLLM 0.26.0's `MambaManager.__init__`), else "".
    deciders: tuple[str, ...] = ()

    def column(self) -> SizingPath:
        """The matrix's column of the allocation: the scheduler's view, per kind."""
        manager = self.manager
        name, line = manager.name, manager.function.lineno
        return SizingPath(
            name,
            manager.module.path,
            manager.qualname,
            line,
            "allocator",
            (("scheduler", self.factors),),
            self.deciders,
        )


def read_allocation(program: Program, evaluator: Evaluator, kinds: tuple[SpecKind, ...]) -> Allocation | None:
    """The allocation of the tree's managers; None when its code does not show both steps."""
    found = handing(program)
    manager = _manager(program)
    if found is None or manager is None:
        return None
    module, candidate, value = found
    # The manager module is parsed in part (the blocks naming a DCP size); subclasses and the spec → manager
    # mapping need not name one.
    tree = ast.parse(manager.module.text)
    classes = _class_defs(tree)
    mapping = _spec_managers(tree, classes, program)
    factors, deciders = [], []
    for kind in kinds:
        spec = kind.flattened()
        handed = handed_value(evaluator, candidate, spec, value)
        factor = _allocated(evaluator, manager, spec, handed)
        overridden = _overridden(program, evaluator, manager, (classes, mapping), spec, handed)
        factors.append(factor if overridden is None else overridden[0])
        deciders.append("" if overridden is None else overridden[1])
    where = f"{module.path.rsplit('/', 1)[-1]}:{value.lineno}"
    return Allocation(manager, where, " ".join(ast.unparse(value).split()), tuple(factors), tuple(deciders))


def _manager(program: Program) -> Candidate | None:
    """The constructor, in the module that defines the manager factory, that scales the manager's own block
    size by its DCP parameter (`self.block_size *= dcp_world_size`)."""
    for module in program.modules.values():
        if f"def {MANAGER_FACTORY}(" not in module.text:
            continue
        for qualname, function, classes in sites.functions(module):
            if function.name != "__init__":
                continue
            params = {a.arg for a in [*function.args.args, *function.args.kwonlyargs]}
            for node in ast.walk(function):
                if (
                    isinstance(node, ast.AugAssign)
                    and isinstance(node.op, ast.Mult)
                    and dotted(node.target) == "self.block_size"
                    and isinstance(node.value, ast.Name)
                    and node.value.id in params
                    and is_dcp_name(node.value.id, module.dcp_aliases)
                ):
                    return Candidate(module, qualname, function, classes, set(), {id(node): node})
    return None


def _allocated(evaluator: Evaluator, manager: Candidate, spec, handed) -> str:
    """The manager's factor when handed `handed`: its scaling site's value, or no scaling where its own test
    (`if dcp_world_size > 1`) keeps the site from running."""
    if not known_number(handed):
        return "?"
    parameter = next(iter(manager.sites.values())).value.id  # type: ignore[attr-defined]
    _, frame = evaluator.call(
        manager.module,
        manager.function,
        [],
        {parameter: handed, "kv_cache_spec": spec},
        receiver=Opaque("self"),
        group_spec=spec,
        sites=manager.sites,
    )
    ran = any(frame.recorded.get(k) for k in manager.sites)
    if not ran or handed == 1:
        return "1" if handed == 1 or not ran else "?"
    return "dcp" if handed == evaluator.dcp else "?"


def _overridden(
    program: Program, evaluator: Evaluator, manager: Candidate, tree: tuple[dict[str, ast.ClassDef], dict], spec, handed
) -> tuple[str, str] | None:
    """(the factor, the constructor that decides it) of the manager class the tree maps `spec`'s kind to,
    where that class (or a class between it and the scaling manager) assigns `self.block_size` after its
    `super().__init__(…)`: what it assigns is what the manager allocates (vLLM 0.27.1's Mamba manager resets
    the size its base scaled). None where no such assignment runs."""
    classes, mapping = tree
    cls = next((mapping[name] for name in program.mro(spec.cls) if name in mapping), None)
    seen: set[str] = set()
    while cls is not None and cls in classes and cls not in seen and cls not in manager.classes:
        seen.add(cls)
        init = next((f for f in classes[cls].body if isinstance(f, ast.FunctionDef) and f.name == "__init__"), None)
        sites = _assignments_after_super(init) if init is not None else {}
        if sites:
            parameter = next(iter(manager.sites.values())).value.id  # type: ignore[attr-defined]
            _, frame = evaluator.call(
                manager.module,
                init,  # type: ignore[arg-type]
                [],
                {parameter: handed, "kv_cache_spec": spec},
                receiver=Opaque("self"),
                group_spec=spec,
                sites=sites,
            )
            ran = [frame.recorded[k] for k in sites if frame.recorded.get(k)]
            if ran:
                value = join(ran[-1])  # the last assignment that runs is what the manager keeps
                factor = {BLOCK_SIZE: "1", BLOCK_SIZE * evaluator.dcp: "dcp"}.get(value, "?")
                return (factor if known_number(value) else "?"), f"{cls}.__init__"
        bases = [dotted(b) for b in classes[cls].bases]
        cls = next((b for b in bases if b in classes), None)
    return None


def _class_defs(tree: ast.Module) -> dict[str, ast.ClassDef]:
    return {n.name: n for n in tree.body if isinstance(n, ast.ClassDef)}


def _spec_managers(tree: ast.Module, classes: dict[str, ast.ClassDef], program: Program) -> dict[str, str]:
    """Spec class → manager class, as the module maps them: a dict literal (`spec_manager_map = {FullAttentionSpec:
    FullAttentionManager, …}`) or a registration call naming both (`register(MambaSpec, MambaManager, …)`)."""
    mapping: dict[str, str] = {}
    for node in ast.walk(tree):
        pairs: list[tuple[ast.AST | None, ast.AST]] = []
        if isinstance(node, ast.Dict):
            pairs = list(zip(node.keys, node.values))
        elif isinstance(node, ast.Call) and len(node.args) >= 2:
            pairs = [(node.args[0], node.args[1])]
        for key, value in pairs:
            spec, manager = dotted(key) if key is not None else None, dotted(value)
            if spec in program.hierarchy.bases and manager in classes:
                mapping.setdefault(spec, manager)  # type: ignore[index]
    return mapping


def _assignments_after_super(init: ast.FunctionDef) -> dict[int, ast.AST]:
    """The values `self.block_size = …` takes in the statements after the `super().__init__(…)` call."""
    sites: dict[int, ast.AST] = {}
    after = False
    for statement in init.body:
        if after:
            for node in ast.walk(statement):
                if isinstance(node, ast.Assign) and any(dotted(t) == "self.block_size" for t in node.targets):
                    sites[id(node.value)] = node.value
        elif any(_is_super_init(n) for n in ast.walk(statement)):
            after = True
    return sites


def _is_super_init(node: ast.AST) -> bool:
    return (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "__init__"
        and isinstance(node.func.value, ast.Call)
        and called_name(node.func.value) == "super"
    )
