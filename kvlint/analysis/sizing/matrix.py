"""The sizing matrix of a tree — spec kinds × every sizing path or predicate — and its divergences.

`analyse_program` finds the candidates (helpers that decide a spec's DCP factor, paths that size the
groups of a config), evaluates each for every kind in the views it sees (a worker's config keeps
containers, the scheduler's is flattened), and compares: every path with the scheduler's reference path,
every predicate and inline gate with the resolver, every first-layer pick over both orders of a
container's layers. The result is the plain, picklable `SizingAnalysis` that `kvlint paths` shows and
the sizing rules report from.
"""

from __future__ import annotations

import ast
import dataclasses
from pathlib import Path

from kvlint.analysis.hierarchy import SpecHierarchy
from kvlint.analysis.sizing import sites
from kvlint.analysis.sizing.allocator import read_allocation
from kvlint.analysis.sizing.divergences import Divergence, FirstLayerPick, PathDivergence, PredicateDivergence
from kvlint.analysis.sizing.evaluator import Evaluator
from kvlint.analysis.sizing.handing import handing_site
from kvlint.analysis.sizing.kinds import spec_kinds
from kvlint.analysis.sizing.program import Program, read_program
from kvlint.analysis.sizing.results import (
    SizingAnalysis,
    SizingPath,
    combined_factor,
    differs,
    factor_word,
    measure_of,
    tokens_for,
)
from kvlint.analysis.sizing.root_causes import called_names, fold_cross_file
from kvlint.analysis.sizing.sites import Candidate
from kvlint.analysis.sizing.values import DCP, Container, Layer, join, known_number
from kvlint.analysis.tree_files import TreeFiles
from kvlint.analysis.vocabulary import ATTENTION_ROOT, DEFAULT_SCHEDULER_ONLY_PATHS, RESOLVER_NAME, SCHEDULER_REFERENCE

_CORE = "vllm/v1/core/"  # where upstream's own reference path and resolver live: preferred over copies
_YARDSTICKS = (RESOLVER_NAME, SCHEDULER_REFERENCE)  # what a plugin's paths are compared with (Program.focus)


# -- the analysis ---------------------------------------------------------------------------------------


class _Analyser:
    def __init__(self, program: Program):
        self.program = program
        self.evaluator = Evaluator(program)
        self.kinds = program.kinds if program.kinds is not None else spec_kinds(program, self.evaluator)
        self.predicates: list[tuple[Candidate, tuple[str, ...]]] = []
        # Names a message may give as the remedy, only where the tree defines them.
        self.resolver_remedy: str | None = None
        self.layers_remedy = "iter_layer_specs" if "iter_layer_specs" in program.hierarchy.functions else None

    def run(self, candidate: Candidate, spec, as_helper: bool, at: dict[int, ast.AST] | None = None):
        keywords = {p: spec for p in candidate.spec_params} if as_helper else {}
        return self.evaluator.call(
            candidate.module,
            candidate.function,
            [],
            keywords,
            receiver=candidate.receiver,
            group_spec=spec,
            sites=at if at is not None else candidate.sites,
        )

    def factor(self, candidate: Candidate, spec, as_helper: bool) -> str:
        value, frame = self.run(candidate, spec, as_helper)
        if as_helper and known_number(value):
            return factor_word(value, measure_of(value) or "span")
        if as_helper and any(isinstance(n, ast.Return) and n.value is not None for n in ast.walk(candidate.function)):
            return "?"  # what it returns is its answer; a size computed on one branch is not
        recorded = [join(frame.recorded[k]) for k in candidate.sites if k in frame.recorded]
        return combined_factor(recorded) if recorded else "?"

    def single_group_factor(self, candidate: Candidate, spec) -> str:
        """The scheduler's span when the config has one group: what the function returns first."""
        value, _ = self.evaluator.call(
            candidate.module,
            candidate.function,
            [],
            {},
            receiver=candidate.receiver,
            group_spec=spec,
            sites={},
            layout=1,
        )
        if isinstance(value, tuple) and value:
            value = value[0]
        return factor_word(value, "span") if known_number(value) else "?"

    # -- candidates ---------------------------------------------------------------------------------

    def candidates(self) -> tuple[list[Candidate], list[Candidate]]:
        """(helpers: take a spec and decide its DCP factor themselves, paths: size groups of a config).

        Sets `predicates`: the helpers whose factors differ between kinds (and the resolver), with them."""
        helpers = [c for c in self._functions({RESOLVER_NAME}) if self._is_helper(c)]
        self.predicates = []
        for helper in helpers:
            delegates = helper.sites and all(
                isinstance(s, ast.Call) and isinstance(s.func, ast.Name) and s.func.id == RESOLVER_NAME
                for s in helper.sites.values()
            )
            if delegates and helper.function.name != RESOLVER_NAME:
                continue  # a wrapper of the resolver agrees with it by construction
            factors = tuple(self.factor(helper, kind.spec, as_helper=True) for kind in self.kinds)
            known = {f for f in factors if f != "?"}
            if helper.function.name == RESOLVER_NAME or len(known) > 1:
                self.predicates.append((helper, factors))
        names = {h.function.name for h, _ in self.predicates if not h.classes} | {RESOLVER_NAME}
        helper_ids = {id(h.function) for h in helpers}
        paths = [c for c in self._functions(names) if id(c.function) not in helper_ids and c.sites]
        return helpers, paths

    def _functions(self, helper_names: set[str]) -> list[Candidate]:
        """Every function of the program with its sizing sites (calls of `helper_names` among them); with a
        focus (a plugin's analysis), the focus' functions and the tree's resolver and scheduler path only."""
        found = []
        focus = self.program.focus
        for module in self.program.modules.values():
            for qualname, function, classes in sites.functions(module):
                if focus is not None and module.path not in focus and function.name not in _YARDSTICKS:
                    continue
                at = sites.widen(sites.sizing_sites(function, module, helper_names), function)
                found.append(Candidate(module, qualname, function, classes, sites.spec_roots(function), at))
        return found

    def _is_helper(self, candidate: Candidate) -> bool:
        if not candidate.spec_params:
            return False
        from_params = any(sites.site_spec_from_parameter(s, candidate.spec_params) for s in candidate.sites.values())
        return (
            from_params
            or sites.has_dcp_param(candidate.function, candidate.module)
            or candidate.function.name == RESOLVER_NAME
        )

    # -- columns ------------------------------------------------------------------------------------

    def _predicate_columns(self) -> tuple[list[SizingPath], SizingPath | None]:
        """(a column per predicate, the resolver's column: upstream's when the tree has copies)."""
        columns: list[SizingPath] = []
        resolver = None
        for helper, factors in self.predicates:
            is_resolver = _is_resolver(helper)
            views = [("group", factors)]
            if is_resolver:
                views.append(("scheduler", tuple(self.factor(helper, k.flattened(), True) for k in self.kinds)))
            column = SizingPath(
                helper.name,
                helper.module.path,
                helper.qualname,
                helper.function.lineno,
                "resolver" if is_resolver else "predicate",
                tuple(views),
            )
            if is_resolver and (resolver is None or helper.module.path.startswith(_CORE)):
                resolver = column
            columns.append(column)
        return columns, resolver

    def _path_column(self, candidate: Candidate, is_reference: bool) -> SizingPath:
        role = (
            "reference"
            if is_reference
            else sites.role(candidate.module, candidate.qualname, candidate.classes, self.program.scheduler_only_paths)
        )
        views = []
        if role in ("worker", "both"):
            views.append(("group", tuple(self.factor(candidate, k.spec, False) for k in self.kinds)))
        if role in ("reference", "scheduler", "both"):
            views.append(("scheduler", tuple(self.factor(candidate, k.flattened(), False) for k in self.kinds)))
        if role == "reference":
            single = tuple(self.single_group_factor(candidate, k.flattened()) for k in self.kinds)
            if set(single) != {"?"}:  # the function may not special-case one group at all
                views.append(("single-group", single))
        return SizingPath(
            candidate.name, candidate.module.path, candidate.qualname, candidate.function.lineno, role, tuple(views)
        )

    def _gate_tables(self, candidate: Candidate) -> list[tuple[Candidate, ast.IfExp, tuple[str, ...]]]:
        """Each inline DCP gate of a path with the factor it picks per kind."""
        tables = []
        for gate in sites.gates(candidate.function, candidate.module).values():
            values = []
            for kind in self.kinds:
                _, frame = self.run(candidate, kind.spec, False, {id(gate): gate})
                values.append(combined_factor([join(frame.recorded[id(gate)])]) if id(gate) in frame.recorded else "?")
            tables.append((candidate, gate, tuple(values)))
        return tables

    def analyse(self) -> SizingAnalysis:
        _, path_candidates = self.candidates()
        predicate_columns, resolver = self._predicate_columns()
        named = [c for c in path_candidates if c.function.name == SCHEDULER_REFERENCE and not c.classes]
        reference_candidate = next((c for c in named if c.module.path.startswith(_CORE)), named[0] if named else None)
        path_columns = [(c, self._path_column(c, c is reference_candidate)) for c in path_candidates]
        reference = next((column for c, column in path_columns if c is reference_candidate), None)
        gates = [table for c in path_candidates for table in self._gate_tables(c)]

        ordered = sorted((c for _, c in path_columns), key=lambda c: (c is not reference, c.module_path, c.line))
        columns = ([resolver] if resolver else []) + [c for c in predicate_columns if c is not resolver]
        columns = ordered[:1] + columns + ordered[1:] if reference is not None else columns + ordered
        scheduler = reference or (resolver.as_reference() if resolver is not None else None)
        self.resolver_remedy = RESOLVER_NAME if resolver is not None else None

        divergences: list[Divergence] = []
        # Without the shared resolver, what the managers allocate is what every other path must match; a
        # manager that disagrees with the scheduler's own path is the defect (kvlint.analysis.sizing.allocator).
        allocation = read_allocation(self.program, self.evaluator, self.kinds) if resolver is None else None
        allocator = allocation.column() if allocation is not None and scheduler is not None else None
        if allocator is not None:
            columns.insert(1, allocator)
            # Against the scheduler's view of several groups: one group alone spans what the managers give it.
            several = dataclasses.replace(scheduler, views=tuple(v for v in scheduler.views if v[0] == "scheduler"))
            found_here = self.divergent_path(allocation.manager, allocator, several)
            if found_here is not None:
                divergences.append(dataclasses.replace(found_here, handed_by=(allocation.handed, allocation.handed_at)))
            path_columns = [(c, col) for c, col in path_columns if c.function is not allocation.manager.function]
        yardstick = allocator or scheduler
        if scheduler is not None:
            found = (self.divergent_path(c, column, yardstick) for c, column in path_columns if column is not reference)
            divergences.extend(d for d in found if d is not None)
        if resolver is not None:
            truth_table = resolver.factors("group")
            helpers = [(h, h.function, factors, None) for h, factors in self.predicates if not _is_resolver(h)]
            inline = [(c, gate.test, factors, gate) for c, gate, factors in gates]
            found = (
                self.divergent_predicate(c, anchor, factors, truth_table, resolver, gate)
                for c, anchor, factors, gate in [*helpers, *inline]
            )
            divergences.extend(d for d in found if d is not None)
        for candidate, as_helper in [*((h, True) for h, _ in self.predicates), *((c, False) for c, _ in path_columns)]:
            divergences.extend(self.first_layer_unwraps(candidate, as_helper))
        if self.program.focus is not None:  # the release's own divergences are not the plugin's, nor its root causes
            divergences = [d for d in divergences if d.module_path in self.program.focus]
        calls = {(c.module.path, c.qualname): called_names(c.function) for c, _ in path_columns}
        divergences = fold_cross_file(divergences, calls)
        return SizingAnalysis(
            kinds=self.kinds,
            paths=tuple(columns),
            divergences=tuple(divergences),
            reference=scheduler.name if scheduler is not None else None,
            resolver=resolver.name if resolver is not None else None,
            allocator=allocator.name if allocator is not None else None,
            source=self.program.source,
            modules=self.program.sources,
        )

    # -- divergences --------------------------------------------------------------------------------

    def _pick(self, differing: list[int], classes=()) -> tuple[int, bool]:
        """The counterexample to show (a reachable container first) and whether any is reachable (on the code
        of a path in `classes`)."""
        reachable = [i for i in differing if self.kinds[i].rejection_for(classes) is None]
        pool = reachable or differing
        pool = sorted(pool, key=lambda i: (not self.kinds[i].is_container, i))
        return pool[0], bool(reachable)

    def divergent_path(self, candidate: Candidate, column: SizingPath, scheduler: SizingPath) -> PathDivergence | None:
        reference = scheduler.factors("scheduler")
        differing: dict[int, tuple[str, str]] = {}
        for view, factors in column.views:
            for index, mine in enumerate(factors):
                if index not in differing and differs(mine, scheduler, index):
                    differing[index] = (view, mine)
        if not differing:
            return None
        index, reachable = self._pick(list(differing), candidate.classes)
        view, mine = differing[index]
        kind = self.kinds[index]
        return PathDivergence(
            candidate.module.path,
            candidate.qualname,
            candidate.function.lineno,
            path=column.name,
            scheduler=scheduler.name_for(index),
            kind=kind.label,
            view=view if kind.is_container else None,
            tokens=tokens_for(mine),
            expected_tokens=tokens_for(reference[index]),
            dcp=DCP,
            also=tuple(self.kinds[i].label for i in differing if i != index),
            rejected_under_dcp=None if reachable else kind.rejection_for(candidate.classes),
            remedy=self.resolver_remedy,
        )

    def divergent_predicate(
        self, candidate: Candidate, anchor: ast.AST, factors, truth_table, resolver: SizingPath, gate: ast.IfExp | None
    ) -> PredicateDivergence | None:
        differing = [i for i, (a, b) in enumerate(zip(factors, truth_table)) if "?" not in (a, b) and a != b]
        if not differing:
            return None
        _, reachable = self._pick(differing)
        return PredicateDivergence(
            candidate.module.path,
            candidate.qualname,
            anchor.lineno,
            column=candidate.module.column(anchor) if gate is not None else None,
            predicate=candidate.name,
            gate=" ".join(ast.unparse(gate).split()) if gate is not None else None,
            resolver=resolver.name,
            kinds=tuple((self.kinds[i].label, factors[i], truth_table[i]) for i in differing),
            rejected_under_dcp=()
            if reachable
            else tuple(sorted({self.kinds[i].rejected_under_dcp for i in differing})),
        )

    def first_layer_unwraps(self, candidate: Candidate, as_helper: bool) -> list[FirstLayerPick]:
        """A record per first-layer pick of a function whose answer changes with the order of two layers."""
        picks = sites.first_layer_picks(candidate.function)
        if not picks:
            return []
        layers = [k.spec for k in self.kinds if not k.is_container]
        rejected = {k.spec.cls: k.rejected_under_dcp for k in self.kinds if not k.is_container}
        found: list[tuple[bool, Layer, Layer, str, str]] = []
        cache: dict[tuple, str] = {}

        def answer(spec) -> str:
            if spec not in cache:
                cache[spec] = self.factor(candidate, spec, as_helper)
            return cache[spec]

        for i, first in enumerate(layers):
            for second in layers[i + 1 :]:
                a, b = answer(Container((first, second))), answer(Container((second, first)))
                if "?" in (a, b) or a == b:
                    continue
                plausible = self._family(first.cls) == self._family(second.cls) and not (
                    rejected[first.cls] or rejected[second.cls]
                )
                found.append((plausible, first, second, a, b))
        if not found:
            return []
        attention = self.program.hierarchy.attention_family()
        found.sort(key=lambda f: (not f[0], not (f[1].cls in attention and f[2].cls in attention)))
        plausible, first, second, a, b = found[0]
        return [
            FirstLayerPick(
                candidate.module.path,
                candidate.qualname,
                pick.lineno,
                candidate.module.column(pick),
                function=candidate.name,
                first=first.cls,
                second=second.cls,
                answer=a,
                reversed_answer=b,
                plausible=plausible,
                remedy=self.layers_remedy,
            )
            for pick in picks
        ]

    def _family(self, cls: str) -> str:
        """The class right below the root (or right below AttentionSpec) that `cls` descends from."""
        bases = self.program.hierarchy.bases
        roots = {name for name, own in bases.items() if not any(b in bases for b in own)}
        for name in self.program.mro(cls):
            if any(b == ATTENTION_ROOT or b in roots for b in bases.get(name, ())):
                return name
        return cls


def _is_resolver(candidate: Candidate) -> bool:
    return candidate.function.name == RESOLVER_NAME and not candidate.classes


def analyse_program(program: Program) -> SizingAnalysis:
    home, where = handing_site(program)
    return dataclasses.replace(_Analyser(program).analyse(), manager_module=home, handed_at=where)


def build_sizing_analysis(
    root: Path | None,
    hierarchy: SpecHierarchy,
    only: frozenset[str] | None = None,
    scheduler_only_paths: tuple[str, ...] = DEFAULT_SCHEDULER_ONLY_PATHS,
    files: TreeFiles | None = None,
    built_containers: tuple[frozenset[str], ...] | None = None,
    texts: dict[str, bytes] | None = None,
) -> SizingAnalysis | None:
    """The cross-file analysis of a tree; None when there is no tree (rules then analyse each file alone) or
    when it failed — then the failure is written down in `files` (the tree index carries it, the scan says it).
    `texts`: the files the sizing program reads, already read (sizing.program.read_program)."""
    if root is None:
        return None
    files = files if files is not None else TreeFiles(Path(root), only)
    try:
        program = read_program(Path(root), hierarchy, only, files, texts)
        program = dataclasses.replace(
            program, scheduler_only_paths=tuple(scheduler_only_paths), built_containers=built_containers
        )
        return analyse_program(program)
    except Exception as error:  # noqa: BLE001 - the per-file rules must still run; the failure is reported
        files.note(f"cross-file analysis incomplete: the sizing analysis failed ({type(error).__name__}: {error})")
        return None
