"""Word a hand-written DCP scaling's verdict (kvlint.analysis.agreement) and give it its severity.

Shared by KV102 (every hand-written scaling) and KV101 (the container check gating one). An error only
for a kind that reaches the site, that vLLM accepts under DCP, and that gets another token span than the
tree's rule gives it; a hand copy that agrees today, or one whose agreement rests on what this file cannot
see, is a warning that says which.
"""

from __future__ import annotations

import re

from kvlint import Message, Severity
from kvlint.analysis.agreement import AGREES, DIFFERS, REJECTED_ONLY, Verdict
from kvlint.analysis.kind_table import tokens
from kvlint.analysis.sizing.values import DCP
from kvlint.analysis.tree_index import ResolverView
from kvlint.analysis.vocabulary import CONTAINER_CLASS, RESOLVER_NAME


def severity_of(verdict: Verdict | None, witness: str | None = None, unproven: str | None = None) -> Severity:
    """`witness` "": the counterexample needs a model (a Mamba hybrid) and the tree has none to name;
    `unproven`: a link of the counterexample the analysis cannot prove (kvlint.analysis.runner_reach)."""
    if witness == "" or unproven:
        return Severity.WARNING
    return Severity.ERROR if verdict is not None and verdict.outcome == DIFFERS else Severity.WARNING


HYBRID = "; a {label} group meets the DCP size in a hybrid model, e.g. {witness}, at DCP={dcp}"
NO_HYBRID = (
    "; a warning, not an error: no model this tree registers builds {label} layers beside attention layers, "
    "so no model vLLM builds is shown to give a {label} group the DCP size"
)


def remedy(view: ResolverView, reference: str, spec: str | None, dcp: str, allocator: bool = False) -> str:
    """The fix by name, from the scan's one view of the resolver (TreeIndex.resolver_view). `allocator`: the
    reference is the KV cache managers' allocation (a tree without the resolver)."""
    if view.source == "tree" and view.lacking:  # code outside the tree: a release it targets has no resolver
        return (
            f"size each layer of a {CONTAINER_CLASS} (its `.kv_cache_specs`) as `{RESOLVER_NAME}` does: vLLM "
            f"{', '.join(view.lacking)}, which this code also targets, has no `{RESOLVER_NAME}` to call"
        )
    if view.source == "tree":
        return f"call `{RESOLVER_NAME}({spec or 'spec'}, {dcp})` instead"
    if view.source == "builtin":
        return f"call vLLM's `{RESOLVER_NAME}({spec or 'spec'}, {dcp})` (from `{view.module}`) instead"
    if reference and allocator:
        return f"this tree has no shared resolver (`{RESOLVER_NAME}`): size it as the KV cache managers allocate (`{reference}`)"
    if reference:
        return f"this tree has no shared resolver (`{RESOLVER_NAME}`): size it as the scheduler's `{reference}` does"
    return f"this tree has no shared resolver (`{RESOLVER_NAME}`) to compare with or call"


def describe(
    expression: str, verdict: Verdict | None, fix_by_name: str, witness: str | None = None, unproven: str | None = None
) -> Message:
    """The verdict in words: a headline (what the expression gives, for which kind), the evidence, the remedy;
    `witness` (kvlint.analysis.hybrid_witness): the model a Mamba counterexample needs, "" when none is;
    `unproven`: the link that makes it a warning."""
    short = one_line(expression, 48)
    if verdict is None:
        return Message(
            f"`{short}` scales a block size by the DCP size by hand",
            f"`{expression}` scales a block size by the DCP size by hand",
            fix_by_name,
        )
    kind = verdict.counterexample
    # Where the managers are the yardstick, the one that allocates this kind (a subclass may reset the size).
    reference = f"`{kind.reference_by or verdict.reference}`" if kind is not None else f"`{verdict.reference}`"
    yardstick = "the resolver" if verdict.reference == RESOLVER_NAME else reference
    if verdict.outcome in (DIFFERS, REJECTED_ONLY) and kind is not None:
        also = (
            f" (also {', '.join(verdict.also[:3])}{' and more' if len(verdict.also) > 3 else ''})"
            if verdict.also
            else ""
        )
        # What the flagged code does (its gate) beside it, not beside the reference it is compared with.
        message = (
            f"`{expression}` ({verdict.how}) gives {tokens(verdict.factor)} tokens per block for a {kind.label} "
            f"group{also} at DCP={DCP} where {reference} gives {tokens(kind.reference)}"
        )
        if verdict.outcome == REJECTED_ONLY:
            message += f" — only for kinds vLLM rejects under DCP ({kind.rejected_under_dcp})"
        headline = (
            f"`{short}` gives {tokens(verdict.factor)} tokens per block for a {kind.label} group at DCP={DCP}, "
            f"{yardstick} {tokens(kind.reference)}"
        )
        detail = f"this code: {verdict.how}; {reference} gives {tokens(kind.reference)}"
        if also:
            detail += f"; the same for{also[len(' (also') : -1]}"
        if verdict.outcome == REJECTED_ONLY:
            detail += f" — only for kinds vLLM rejects under DCP ({kind.rejected_under_dcp})"
        elif witness is not None:
            said = (HYBRID if witness else NO_HYBRID).format(label=kind.label, witness=witness, dcp=DCP)
            message, detail = message + said, detail + said
        if unproven and verdict.outcome == DIFFERS:
            said = f"; a warning, not an error: {unproven}"
            message, detail = message + said, detail + said
        return Message(headline, detail, fix_by_name, statement=message, kinds=(kind.label, *verdict.also))
    if verdict.outcome == AGREES:
        provided = (
            f" as long as its callers pass {verdict.unsettled} as the DCP size for the kinds that reach it"
            if verdict.unsettled
            else ""
        )
        return Message(
            f"`{short}` restates {reference} by hand (agrees today)",
            f"`{expression}` restates {reference} by hand ({verdict.how}): it agrees with it for every kind that "
            f"reaches it today{provided}, and drifts when the resolver changes",
            fix_by_name,
        )
    would = ""
    if kind is not None:
        would = (
            f"; if {verdict.if_so}, a {kind.label} group gets {tokens(verdict.factor)} tokens per block at "
            f"DCP={DCP} where {reference} gives {tokens(kind.reference)}"
        )
    return Message(
        f"`{short}` scales a block size by the DCP size by hand; agreement with {reference} not settled",
        f"`{expression}` scales a block size by the DCP size by hand ({verdict.how}); whether it agrees with "
        f"{reference} is not settled here: {verdict.unsettled}{would}",
        fix_by_name,
    )


def one_line(code: str, limit: int | None = 60) -> str:
    """One line, no padding inside brackets (`groups[\n    g\n]` → `groups[g]`), cut at `limit` (None: whole,
    as a remedy quotes code: to be copied)."""
    flat = re.sub(r"([(\[{]) | ([)\]}])", lambda m: m.group(1) or m.group(2), " ".join(code.split()))
    return flat if limit is None or len(flat) <= limit else flat[: limit - 1] + "…"
