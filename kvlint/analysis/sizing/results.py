"""The plain records of the sizing matrix — a path's DCP factor per spec kind and view, the analysis with
its divergences — and the words a factor is written in ("dcp", "1", "?").

Built by kvlint.analysis.sizing.matrix; picklable, read by `kvlint paths` and the sizing rules.
"""

from __future__ import annotations

from dataclasses import dataclass

from kvlint.analysis.sizing.divergences import Divergence
from kvlint.analysis.sizing.kinds import SpecKind
from kvlint.analysis.sizing.values import BLOCK_SIZE, DCP, known_number


@dataclass(frozen=True)
class SizingPath:
    """A column: one sizing path or predicate and the DCP factor it applies to each kind."""

    name: str  # module:function, module dotted
    module_path: str
    qualname: str
    line: int
    role: str  # reference | resolver | allocator | predicate | scheduler | worker | both
    # Per view ("group" = container as given, "scheduler" = flattened, "single-group"): one factor per kind.
    views: tuple[tuple[str, tuple[str, ...]], ...]
    # The allocator's, per kind: the constructor that decides it where a manager subclass resets the size this
    # path set (vLLM 0.26.0's `MambaManager.__init__`), else "" (kvlint.analysis.sizing.allocator).
    deciders: tuple[str, ...] = ()

    def name_for(self, index: int) -> str:
        """The path that decides kind `index`: a manager subclass of the same module (`deciders`), or this."""
        decider = self.deciders[index] if index < len(self.deciders) else ""
        return f"{self.name.split(':')[0]}:{decider}" if decider else self.name

    def factors(self, view: str) -> tuple[str, ...] | None:
        return next((f for v, f in self.views if v == view), None)

    def as_reference(self) -> SizingPath:
        """The resolver standing in for the scheduler's path (a tree without `resolve_kv_cache_block_sizes`)."""
        return SizingPath(
            self.name,
            self.module_path,
            self.qualname,
            self.line,
            "reference",
            (("scheduler", self.factors("scheduler") or ()),),
        )


@dataclass(frozen=True)
class SizingAnalysis:
    """Plain, picklable results of the cross-file analysis (TreeIndex.sizing)."""

    kinds: tuple[SpecKind, ...]
    paths: tuple[SizingPath, ...]
    divergences: tuple[Divergence, ...]
    reference: str | None  # the scheduler's path name
    resolver: str | None
    # Without the shared resolver (vLLM < 0.29): the managers' allocation every other path is compared with.
    allocator: str | None = None
    source: str = ""
    # The tree's files the analysis read (kvlint.analysis.sizing.program): code outside the tree is analysed with them.
    modules: tuple[str, ...] = ()
    dcp: int = DCP
    block_size: int = BLOCK_SIZE
    # The module whose manager constructors take the DCP size the coordinator hands them, and where it
    # hands it (kvlint.analysis.sizing.handing.handing_site); "" without such a handing.
    manager_module: str = ""
    handed_at: str = ""

    def divergences_in(self, module_path: str) -> tuple[Divergence, ...]:
        """The divergences placed in one module: all a rule linting that module reads of the analysis."""
        return tuple(d for d in self.divergences if d.module_path == module_path)

    def differs(self, path: SizingPath, index: int) -> bool:
        """Whether this cell disagrees with what the path is compared against."""
        against = self._against(path)
        if against is None:
            return False
        if path.role == "predicate":
            target = against.factors("group")
            return target is not None and any(
                f[index] != target[index] and "?" not in (f[index], target[index]) for _, f in path.views
            )
        return any(differs(f[index], against, index) for _, f in path.views)

    def _against(self, path: SizingPath) -> SizingPath | None:
        if path.role in ("reference", "resolver"):
            return None
        if path.role == "predicate":
            return next((p for p in self.paths if p.name == self.resolver), None)
        if self.allocator is not None and path.role != "allocator":
            return next((p for p in self.paths if p.name == self.allocator and p.role == "allocator"), None)
        found = next((p for p in self.paths if p.name == self.reference and p.role == "reference"), None)
        if found is None and self.reference == self.resolver:
            found = next((p for p in self.paths if p.name == self.resolver), None)
            return found.as_reference() if found is not None else None
        return found


def differs(mine: str, scheduler: SizingPath, index: int) -> bool:
    """Whether `mine` matches none of the scheduler's known answers for this kind (one per layout)."""
    theirs = {factors[index] for _, factors in scheduler.views} - {"?"}
    return mine != "?" and bool(theirs) and mine not in theirs


# -- from values to factors ---------------------------------------------------------------------------


def factor_word(value, measure: str) -> str:
    """ "dcp", "1" or "?": what a span (block size × factor) or a bare factor says about DCP scaling."""
    if not known_number(value):
        return "?"
    if measure == "span":
        return {BLOCK_SIZE * DCP: "dcp", BLOCK_SIZE: "1"}.get(value, "?")
    return {DCP: "dcp", 1: "1"}.get(value, "?")


def measure_of(value) -> str | None:
    if value in (BLOCK_SIZE, BLOCK_SIZE * DCP):
        return "span"
    if value in (1, DCP):
        return "factor"
    return None


def combined_factor(values: list) -> str:
    factors = {factor_word(v, measure_of(v) or "span") for v in values}
    return factors.pop() if len(factors) == 1 else "?"


def tokens_for(factor: str) -> str:
    return {"dcp": str(BLOCK_SIZE * DCP), "1": str(BLOCK_SIZE)}.get(factor, "?")
