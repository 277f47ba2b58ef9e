"""Cross-file root causes: a divergent path whose divergence comes from a helper another module defines,
itself a divergent predicate, is that predicate's related location rather than a finding of its own.

vLLM 0.29.0: the KV cache coordinator sizes groups through `dcp_world_size_for_kv_cache_spec`, a helper of
kv_cache_utils.py whose truth table differs from the resolver's for chunked local attention; the
coordinator's path diverges for the same kind, because of the helper. One defect, reported at the helper.
"""

from __future__ import annotations

import ast
from dataclasses import replace

from kvlint.analysis.sizing.divergences import Divergence, PathDivergence, PredicateDivergence


def called_names(function: ast.AST) -> frozenset[str]:
    names = set()
    for node in ast.walk(function):
        if isinstance(node, ast.Call):
            func = node.func
            names.add(func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else "")
    return frozenset(names - {""})


def fold_cross_file(divergences: list[Divergence], calls: dict[tuple[str, str], frozenset[str]]) -> list[Divergence]:
    """`calls`: (module path, qualname) of each divergent path's function → the names it calls."""
    helpers = [d for d in divergences if isinstance(d, PredicateDivergence) and d.column is None]
    related: dict[int, list[PathDivergence]] = {}
    result: list[Divergence] = []
    for divergence in divergences:
        if isinstance(divergence, PathDivergence):
            called = calls.get((divergence.module_path, divergence.qualname), frozenset())
            helper = next(
                (
                    h
                    for h in helpers
                    if h.module_path != divergence.module_path
                    and h.qualname.rsplit(".", 1)[-1] in called
                    and divergence.kind in {kind for kind, _, _ in h.kinds}
                ),
                None,
            )
            if helper is not None:
                divergence = replace(divergence, root_cause=f"{helper.module_path}:{helper.line}")
                related.setdefault(id(helper), []).append(divergence)
        result.append(divergence)
    return [
        replace(d, related_paths=tuple(related[id(d)]))
        if isinstance(d, PredicateDivergence) and id(d) in related
        else d
        for d in result
    ]
