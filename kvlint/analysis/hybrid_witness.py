"""The model a hand-written scaling's Mamba counterexample needs: a checkpoint that builds Mamba layers beside
attention layers (a hybrid), so that a Mamba group meets the DCP size at all (issue 26: an error names a
model vLLM builds). Read from the census (kvlint.analysis.census), never written to it."""

from __future__ import annotations

from kvlint.analysis.census.reading import Census, witness_order
from kvlint.analysis.hierarchy import SpecHierarchy

MAMBA = "MambaSpec"
ATTENTION = "AttentionSpec"


def hybrid_witness(census: Census | None, hierarchy: SpecHierarchy, verdict) -> str | None:
    """For a verdict whose counterexample is a plain Mamba-family kind: the model to name (its name and the
    layers one checkpoint of it builds), or "" when no model the census reads builds Mamba layers beside
    attention. None when the counterexample needs no such model or no census was read."""
    kind = getattr(verdict, "counterexample", None)
    if census is None or kind is None or kind.is_container or not hierarchy.is_subclass(kind.label, MAMBA):
        return None
    for model in sorted(census.models, key=witness_order):
        for alternative in model.alternatives or (model.layers,):  # none kept apart: every layer it builds
            specs = {spec for name in alternative if (layer := census.layer(name)) for spec in layer.spec_classes}
            mamba = any(hierarchy.is_subclass(spec, kind.label) for spec in specs)
            if mamba and any(hierarchy.is_subclass(spec, ATTENTION) for spec in specs):
                return f"{model.name} ({', '.join(sorted(alternative))})"
    return ""
