"""What the sizing analysis finds, as plain records: where it is and what disagrees with what.

No wording and no severity: a rule turns a record into a finding (the sizing rules declare which
record type they report). Every record names its place the same way: the module, the function's qualified name, a line, and a column (None: the
function's def; else the 1-based character column of the expression).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class PathDivergence:
    """A sizing path whose token span differs from the scheduler's for some kind of group (on its def)."""

    module_path: str
    qualname: str
    line: int
    path: str  # `module:function` of the divergent path
    scheduler: str  # the scheduler's path it is compared with
    kind: str  # the counterexample: a kind vLLM accepts under DCP first, a container first among those
    view: str | None  # for a container: "group" (the worker's view) or "scheduler" (flattened); else None
    tokens: str  # tokens per block the path gives for `kind` ("?" when unknown)
    expected_tokens: str  # what the scheduler gives
    dcp: int
    also: tuple[str, ...]  # the other kinds that differ
    # Set when every differing kind is one the tree rejects under DCP: the shown kind's rejection.
    rejected_under_dcp: str | None = None
    # The shared resolver's name when the tree defines one: what the path should size with.
    remedy: str | None = None
    # "module:line" of a helper another module defines, itself a divergent predicate, that this path calls
    # and that differs for the same kind: the root cause (the path is its related location).
    root_cause: str | None = None
    # A KV cache manager's own scaling (a tree without the shared resolver): what the coordinator hands it, as
    # written, and "module.py:line" of that call.
    handed_by: tuple[str, str] | None = None

    @property
    def column(self) -> None:
        return None


@dataclass(frozen=True)
class PredicateDivergence:
    """A DCP predicate (a helper, or an inline `dcp if <test> else 1` gate) whose truth table over the
    kinds differs from the resolver's."""

    module_path: str
    qualname: str
    line: int
    column: int | None  # None: a helper's def; else the gate's test
    predicate: str  # `module:function` of the helper, or of the function holding the gate
    gate: str | None  # the gate's source on one line; None for a helper
    resolver: str
    kinds: tuple[tuple[str, str, str], ...]  # per differing kind: (kind, the predicate's factor, the resolver's)
    # Set when every differing kind is one the tree rejects under DCP: their rejections, sorted.
    rejected_under_dcp: tuple[str, ...] = ()
    # The divergent paths of other modules that diverge through this helper (its related locations).
    related_paths: tuple[PathDivergence, ...] = ()


@dataclass(frozen=True)
class FirstLayerPick:
    """`next(iter(spec.kv_cache_specs.values()))` in a function whose answer changes with the order of a
    container's layers (one record per pick)."""

    module_path: str
    qualname: str
    line: int
    column: int
    function: str  # `module:function`
    first: str  # layer classes of the counterexample: {first, second} and {second, first}
    second: str
    answer: str  # the function's factor for {first, second}
    reversed_answer: str  # … and for {second, first}
    # The layers are of one spec family that vLLM may group together, and neither is rejected under DCP.
    plausible: bool
    # The interface's helper that hands every layer (`iter_layer_specs`), when the tree has it.
    remedy: str | None = None


Divergence = PathDivergence | PredicateDivergence | FirstLayerPick
