"""The rows of the sizing matrix: what a KV cache group's spec can be in the scanned tree.

Every concrete spec class of the tree's hierarchy, and the containers vLLM builds (a DSA group's MLA and
indexer layers, one of full-attention layers, a mixed one), each with the reason vLLM rejects it under
DCP when an assertion in the tree says so: one of the spec's own methods, the coordinator's check of
every group's kind when DCP > 1, or a method the scheduler calls on the group's KV cache manager that
asserts the spec's kind and a DCP size of 1 (vLLM's `MambaManager.find_longest_cache_hit`: with prefix
caching, on by default, a Mamba group under DCP fails there) — unless that manager only ever sees a DCP size
of 1 for the kind: vLLM 0.29.0's coordinator hands it a per-kind size, 0.34.0's manager keeps 1 for a spec
that is not `dcp_sharded` (kvlint.analysis.sizing.handing), so there the assert refuses nothing.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, replace

from kvlint.analysis.ast_helpers import dotted, walk
from kvlint.analysis.sizing import sites
from kvlint.analysis.sizing.evaluator import Evaluator
from kvlint.analysis.sizing.frame import Frame
from kvlint.analysis.sizing.handing import handed_value, handing, held_values
from kvlint.analysis.sizing.program import Program
from kvlint.analysis.sizing.values import DCP, Container, Layer, truth
from kvlint.analysis.vocabulary import ATTENTION_ROOT, CONTAINER_CLASS, is_dcp_name


@dataclass(frozen=True)
class SpecKind:
    """A row of the matrix: what a KV cache group's spec can be."""

    label: str
    spec: Layer | Container
    # Why vLLM refuses this kind when DCP > 1 (an assertion in the tree), or None when it accepts it.
    rejected_under_dcp: str | None = None
    # Accepted, but refused on the code of some classes: (class, why) for each class whose call of a
    # manager's refusing method passes it the process's DCP size (vLLM 0.27.1's coordinator for one group:
    # a Mamba group alone fails there, while the hybrid coordinator passes it 1).
    rejected_in: tuple[tuple[str, str], ...] = ()
    # The DCP size the coordinator hands a manager of this kind (kvlint.analysis.sizing.handing): "dcp" (the
    # process's), "1", or "" (not known, or no coordinator hands one).
    handed: str = ""

    def rejection_for(self, classes) -> str | None:
        """Why this kind is refused on the code of a path in `classes`, or None."""
        return self.rejected_under_dcp or next((why for cls, why in self.rejected_in if cls in classes), None)

    @property
    def is_container(self) -> bool:
        return isinstance(self.spec, Container)

    def flattened(self) -> Layer:
        """What the scheduler's config holds for this group: the engine keeps the first layer's spec."""
        return self.spec.layers[0] if isinstance(self.spec, Container) else self.spec


def spec_kinds(program: Program, evaluator: Evaluator) -> tuple[SpecKind, ...]:
    hierarchy = program.hierarchy
    roots = {n for n, bases in hierarchy.bases.items() if not any(b in hierarchy.bases for b in bases)}
    abstract = roots | {ATTENTION_ROOT, CONTAINER_CLASS}
    group_checks = coordinator_checks(program)
    handlers = manager_checks(program)
    handed = handing(program) if handlers else None

    def held_one(cls: str) -> bool:
        return _held_one(program, evaluator, handed, cls)

    rejected = {
        cls: dcp_rejection(program, evaluator, cls)
        or _refused_group(program, group_checks, cls)
        or _refused_by_manager(program, evaluator, handlers, cls, held_one)
        for cls in hierarchy.bases
        if cls not in abstract
    }
    kinds = [
        SpecKind(
            cls, Layer(cls), rejected[cls], () if rejected[cls] else _refused_in(evaluator, handlers, cls, held_one)
        )
        for cls in hierarchy.bases
        if cls not in abstract
    ]
    if CONTAINER_CLASS in hierarchy.bases:
        for label, layers in _containers(program):
            reasons = [rejected.get(layer.cls) for layer in layers if rejected.get(layer.cls)]
            kinds.append(SpecKind(f"{CONTAINER_CLASS}{label}", Container(layers), reasons[0] if reasons else None))
    found = handing(program)
    if found is None:
        return tuple(kinds)
    return tuple(replace(kind, handed=_handed_factor(evaluator, found, kind.spec)) for kind in kinds)


def _handed_factor(evaluator: Evaluator, found, spec) -> str:
    """What the coordinator hands a manager of a `spec` group, as a factor of the block size."""
    _, candidate, value = found
    handed = handed_value(evaluator, candidate, spec, value)
    return {DCP: "dcp", 1: "1"}.get(handed, "") if type(handed) is int else ""


def coordinator_checks(program: Program) -> list[tuple[frozenset[str], str]]:
    """The group kinds the coordinator admits under DCP: `if dcp_world_size > 1: for g in …kv_cache_groups:
    assert isinstance(g.kv_cache_spec, (A, B))` — (the admitted classes, why), one per such assertion."""
    checks = []
    for module in program.modules.values():
        if "kv_cache_groups" not in module.text:  # the loop's iterable names it, as written in the source
            continue
        for qualname, function, _ in sites.functions(module):
            for branch in walk(function):
                if not (isinstance(branch, ast.If) and _dcp_above_one(branch.test, module)):
                    continue
                for loop in branch.body:
                    if not (isinstance(loop, ast.For) and "kv_cache_groups" in ast.unparse(loop.iter)):
                        continue
                    for statement in loop.body:
                        admitted = _admitted(statement, loop.target)
                        if admitted:
                            text = " ".join(ast.unparse(statement.test).split())  # type: ignore[attr-defined]
                            checks.append((admitted, f"{qualname} asserts `{text}` for every group when DCP > 1"))
    return checks


def _dcp_above_one(test: ast.expr, module) -> bool:
    return (
        isinstance(test, ast.Compare)
        and len(test.ops) == 1
        and isinstance(test.ops[0], (ast.Gt, ast.NotEq))
        and isinstance(test.comparators[0], ast.Constant)
        and test.comparators[0].value == 1
        and (dotted(test.left) or "").split(".")[-1] != ""
        and is_dcp_name((dotted(test.left) or "").split(".")[-1], module.dcp_aliases)
    )


def _admitted(statement: ast.stmt, target: ast.expr) -> frozenset[str]:
    """`assert isinstance(<loop var>.kv_cache_spec, (A, B))`: {A, B}; else empty."""
    if not isinstance(statement, ast.Assert) or not isinstance(statement.test, ast.Call):
        return frozenset()
    call = statement.test
    if not (isinstance(call.func, ast.Name) and call.func.id == "isinstance" and len(call.args) == 2):
        return frozenset()
    subject = dotted(call.args[0]) or ""
    if not (isinstance(target, ast.Name) and subject == f"{target.id}.kv_cache_spec"):
        return frozenset()
    classes = call.args[1].elts if isinstance(call.args[1], ast.Tuple) else [call.args[1]]
    return frozenset(dotted(c) or "" for c in classes) - {""}


def _refused_group(program: Program, checks, cls: str) -> str | None:
    """Why the coordinator refuses a group of this class under DCP (its spec, as the scheduler sees it)."""
    for admitted, why in checks:
        if not any(program.hierarchy.is_subclass(cls, a) for a in admitted):
            return why
    return None


def manager_checks(program: Program) -> list[tuple[frozenset[str], str, list, str]]:
    """Methods that assert, among their first statements, both the kind of the spec they are handed
    (`assert isinstance(kv_cache_spec, MambaSpec)`) and a DCP size of 1 (`assert dcp_world_size == 1`), and
    that some module of the program calls: (the asserted spec classes, why, the DCP sizes its calls pass, the
    parameter), one per such method."""
    texts = [module.text for module in program.modules.values()]
    found = []
    for module in program.modules.values():
        for qualname, function, owners in sites.functions(module):
            if not owners:
                continue
            parameters = {a.arg for a in [*function.args.args, *function.args.kwonlyargs]}
            kinds: frozenset[str] = frozenset()
            refusal = ""
            for statement in function.body:
                if not isinstance(statement, ast.Assert):
                    continue
                if not kinds:
                    kinds = _asserted_kinds(statement.test, parameters)
                if not refusal and _dcp_is_one(statement.test, parameters, module):
                    refusal = " ".join(ast.unparse(statement.test).split())
            # Asked last (a search of every module's text): a method no module calls refuses nothing.
            if kinds and refusal and any(f".{function.name}(" in text for text in texts):
                why = f"{qualname} asserts `{refusal}` for a {' or '.join(sorted(kinds))} group"
                parameter = refusal.split()[0]
                found.append((kinds, why, _passed_sizes(program, function, parameter), parameter))
    return found


def _passed_sizes(program: Program, function: ast.FunctionDef, parameter: str) -> list:
    """(module, the DCP size as passed, the caller's top-level statement) for every call of the method that
    passes one. A call that passes none is another class's method of that name (or takes the default, not
    the process's size)."""
    method = function.name
    positional = [a.arg for a in function.args.args[1:]]  # after self / cls
    position = positional.index(parameter) if parameter in positional else None
    passed = []
    for module in program.modules.values():
        if f".{method}(" not in module.text:
            continue
        for node in module.tree.body:
            for call in walk(node):
                if not (
                    isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute) and call.func.attr == method
                ):
                    continue
                value = next((k.value for k in call.keywords if k.arg == parameter), None)
                if value is None and position is not None and len(call.args) > position:
                    value = call.args[position]
                if value is not None:
                    passed.append((module, value, node))
    return passed


def _passes_one(evaluator: Evaluator, passed: tuple, parameter: str, cls: str, held_one) -> bool:
    """Whether a call passes a DCP size of 1 for a group of `cls`: the manager's own size when the manager
    keeps 1 for it, or an expression that gives 1 for it (vLLM 0.27.1's hybrid lookup: `self.dcp_world_size
    if isinstance(spec, FullAttentionSpec) else 1`)."""
    module, value, scope = passed
    if _held_size(value, parameter, scope):
        return held_one(cls)
    # The names the expression tests the kind of stand for a group of `cls`.
    env = {
        n.args[0].id: Layer(cls)
        for n in walk(value)
        if isinstance(n, ast.Call) and dotted(n.func) == "isinstance" and n.args and isinstance(n.args[0], ast.Name)
    }
    return evaluator.eval(value, env, Frame(module)) == 1


def _held_size(value: ast.expr, parameter: str, scope: ast.stmt) -> bool:
    """`<a manager>.dcp_world_size`, or `self.dcp_world_size` that `scope` (the caller's class) assigns only
    from another object's `.dcp_world_size`."""
    if not (isinstance(value, ast.Attribute) and value.attr == parameter):
        return False
    if dotted(value) != f"self.{parameter}":
        return True  # another object's: a manager's
    assigned = [
        n.value
        for n in walk(scope)
        if isinstance(n, ast.Assign) and any(dotted(t) == f"self.{parameter}" for t in n.targets)
    ]
    return bool(assigned) and all(
        _held_size(a, parameter, scope) and dotted(a) != f"self.{parameter}" for a in assigned
    )


def _held_one(program: Program, evaluator: Evaluator, handed, cls: str) -> bool:
    """Whether a manager of a group of `cls` keeps a DCP size of 1 whatever the process's: what the
    coordinator hands it, as its constructor keeps it."""
    if handed is None:
        return False
    _, candidate, value = handed
    spec = Layer(cls)
    return all(
        held == 1 for held in held_values(program, evaluator, spec, handed_value(evaluator, candidate, spec, value))
    )


def _asserted_kinds(test: ast.expr, parameters: set[str]) -> frozenset[str]:
    """`isinstance(<a parameter>, (A, B))`: {A, B}; else empty."""
    if not (isinstance(test, ast.Call) and isinstance(test.func, ast.Name) and test.func.id == "isinstance"):
        return frozenset()
    if len(test.args) != 2 or not (isinstance(test.args[0], ast.Name) and test.args[0].id in parameters):
        return frozenset()
    classes = test.args[1].elts if isinstance(test.args[1], ast.Tuple) else [test.args[1]]
    return frozenset(dotted(c) or "" for c in classes) - {""}


def _dcp_is_one(test: ast.expr, parameters: set[str], module) -> bool:
    """`<a DCP-size parameter> == 1`."""
    return (
        isinstance(test, ast.Compare)
        and len(test.ops) == 1
        and isinstance(test.ops[0], ast.Eq)
        and isinstance(test.left, ast.Name)
        and test.left.id in parameters
        and is_dcp_name(test.left.id, module.dcp_aliases)
        and isinstance(test.comparators[0], ast.Constant)
        and test.comparators[0].value == 1
    )


def _refused_by_manager(program: Program, evaluator: Evaluator, checks, cls: str, held_one) -> str | None:
    """Why the manager of a group of this class fails under DCP: a method it runs asserts DCP = 1 for it and
    no call of it passes 1 for this kind. One that does is a configuration vLLM accepts: vLLM 0.29.0's
    coordinator hands a Mamba group's manager 1 (`dcp_world_size_for_kv_cache_spec`), 0.34.0's manager keeps
    1 unless `dcp_sharded`, 0.27.1's hybrid lookup passes 1 for any group but full attention."""
    for kinds, why, passed, parameter in checks:
        if not any(program.hierarchy.is_subclass(cls, kind) for kind in kinds):
            continue
        if passed and any(_passes_one(evaluator, p, parameter, cls, held_one) for p in passed):
            continue
        if not passed and held_one(cls):
            continue
        return why
    return None


def _refused_in(evaluator: Evaluator, checks, cls: str, held_one) -> tuple[tuple[str, str], ...]:
    """(caller class, why) for the calls of a refusing manager method that pass a group of `cls` the
    process's DCP size, where another call passes it 1 (so the kind is accepted elsewhere)."""
    found = []
    for kinds, why, passed, parameter in checks:
        if not any(evaluator.program.hierarchy.is_subclass(cls, kind) for kind in kinds):
            continue
        for call in passed:
            scope = call[2]
            if isinstance(scope, ast.ClassDef) and not _passes_one(evaluator, call, parameter, cls, held_one):
                found.append((scope.name, why))
    return tuple(dict.fromkeys(found))


def _built(program: Program, *families: str, only: bool = False) -> bool:
    """Whether the census has a container holding a spec of each family, not counting MLA specs as full ones
    (`only`: nothing else); any when there is no census."""
    if program.built_containers is None:
        return True
    is_subclass = program.hierarchy.is_subclass

    def of(spec: str, family: str) -> bool:
        return is_subclass(spec, family) and (family == "MLAAttentionSpec" or not is_subclass(spec, "MLAAttentionSpec"))

    return any(
        all(any(of(spec, family) for spec in specs) for family in families)
        and (not only or all(any(of(spec, family) for family in families) for spec in specs))
        for specs in program.built_containers
    )


def _containers(program: Program) -> list[tuple[str, tuple[Layer, ...]]]:
    """The container kinds compared: those the tree's census says some model builds (`UniformTypeKVCacheSpecs.
    from_specs` never holds sliding-window and full layers together: no such kind is compared)."""
    bases = program.hierarchy.bases
    containers: list[tuple[str, tuple[Layer, ...]]] = []
    if "MLAAttentionSpec" in bases and _built(program, "MLAAttentionSpec", only=True):
        indexer = program.indexer or Layer("MLAAttentionSpec")
        indexer = Layer(indexer.cls, indexer.overrides, role="indexer")
        containers.append(("{MLA, indexer}", (Layer("MLAAttentionSpec"), indexer)))
    if "FullAttentionSpec" in bases and _built(program, "FullAttentionSpec"):
        containers.append(("{FullAttention×2}", (Layer("FullAttentionSpec"), Layer("FullAttentionSpec"))))
    if (
        "SlidingWindowSpec" in bases
        and "FullAttentionSpec" in bases
        and _built(program, "SlidingWindowSpec", "FullAttentionSpec")
    ):
        containers.append(("{SlidingWindow, FullAttention}", (Layer("SlidingWindowSpec"), Layer("FullAttentionSpec"))))
    return containers


def dcp_rejection(program: Program, evaluator: Evaluator, cls: str) -> str | None:
    """An `assert` on the DCP size, at the top of a method this class has, that fails for it when DCP > 1."""
    module = evaluator.interface_module()
    if module is None:
        return None
    seen: set[str] = set()
    for owner in program.mro(cls):
        body = program.classes.get(owner)
        for method in body.body if body is not None else ():
            if not isinstance(method, ast.FunctionDef) or method.name in seen:
                continue
            seen.add(method.name)
            for statement in method.body:
                if not isinstance(statement, ast.Assert):
                    continue
                text = ast.unparse(statement.test)
                if "decode_context_parallel" not in text and "dcp" not in text:
                    continue
                frame = Frame(module)
                env = evaluator.bind(method, [], {}, Layer(cls), frame)
                if truth(evaluator.eval(statement.test, env, frame)) is False:
                    return f"{owner}.{method.name} asserts `{text}`"
    return None
