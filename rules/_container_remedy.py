"""What KV101 tells an author to write instead of a group-spec isinstance check, with the helpers the scanned
tree has; and how it words the setting that builds its counterexample. Apart from the rule module, which
reads top-down as a rule should."""

from __future__ import annotations

from dataclasses import replace
from functools import cache

import libcst as cst

from kvlint import Message, Severity
from kvlint.analysis.ast_candidates import tests_a_layer_class
from kvlint.analysis.branch_taken import raised_when_false
from kvlint.analysis.deliberate import benchmark_only, comments_at, fail_closed
from kvlint.analysis.flow.dominance import dominated, related_to
from kvlint.analysis.flow.layer_selection import LayerSelection, accepted_under_dcp, built_containers, reaching
from kvlint.analysis.flow.provenance import dotted
from kvlint.analysis.own_specs import judged_as
from kvlint.analysis.scaling import is_dcp_size, match_scaling
from kvlint.analysis.vocabulary import CONTAINER_CLASS, dcp_aliases, scheduler_only_paths
from kvlint.rules._scaling_verdict import one_line


def remedy(functions, subject: str, checked: frozenset[str], guarded_use: str | None = None) -> str:
    """`guarded_use`: the check lets `subject` through to a use of it (`subject.num_kv_heads`): a helper that
    answers a container True (`is_full_attention_spec`) would hand that use the container whole, so only the
    layers, each tested and each read, are a remedy there."""
    if guarded_use is None and checked == {"FullAttentionSpec"} and "is_full_attention_spec" in functions:
        return f"test `is_full_attention_spec({subject})`, which looks at every layer"
    classes = next(iter(checked)) if len(checked) == 1 else f"({', '.join(sorted(checked))})"
    if "iter_layer_specs" in functions:
        return f"test its layers, `iter_layer_specs({subject})`, with `isinstance(layer, {classes})`"
    return f"test the layers of `{subject}.kv_cache_specs` when it is a {CONTAINER_CLASS}"


# Why a proven container is still a warning: no user meets the wrong answer as a defect.
FAIL_CLOSED = "a warning, not an error: the check refuses what it cannot vouch for on purpose (“{words}”)"
BENCHMARK_ONLY = "a warning, not an error: the code exists for benchmarks only (“{words}”)"


def unmet_defect(rule, node, function, message: Message) -> tuple[Message, Severity]:
    """A wrong answer no user meets as a defect (kvlint.analysis.deliberate): a warning that says why."""
    comments = comments_at(rule.context.source.splitlines(), rule.context.position(node).start.line)
    refusal = fail_closed(node, rule.flow.parent, function, comments)
    words = None if refusal else benchmark_only(rule.context.wrapper.module, node, rule.flow.parent)
    why = FAIL_CLOSED.format(words=refusal) if refusal else BENCHMARK_ONLY.format(words=words) if words else None
    if why is None:
        return message, Severity.ERROR
    return replace(message, detail=f"{message.detail}; {why}", statement=f"{message.statement}; {why}"), (
        Severity.WARNING
    )


_OTHER_BRANCH = "such a group takes the other branch"


def said_branch(rule, node, message: Message) -> Message:
    """Where the other branch raises, the message says so: a loud refusal, not a silent wrong answer."""
    raised = raised_when_false(node, rule.flow.parent)
    if raised is None:
        return message
    said = f"{_OTHER_BRANCH}, which raises `{raised}` (a refusal at run time, not a silent wrong answer)"
    return replace(
        message,
        detail=message.detail.replace(_OTHER_BRANCH, said),
        statement=message.statement.replace(_OTHER_BRANCH, said),
    )


def with_remedy(rule, node, message: Message, whole: str, tested, guarded) -> Message:
    """The finding's message with what to write instead, and what its other branch does where that raises."""
    fix = remedy(rule.context.project.interface_functions(), whole, tested, guarded)
    return replace(said_branch(rule, node, message), remedy=fix)


def built_by(composition) -> dict[str, str]:
    """The fields of KV101's BUILT message that name the witness: model, setting, layers, path and guard."""
    if composition.is_default:
        setting = " with default settings"  # a checkpoint's config may still decide the layers
    elif composition.setting.startswith("possible: "):
        setting = f" possibly ({composition.setting.removeprefix('possible: ')})"
    else:
        setting = f" under {composition.setting.removeprefix('opt-in: ')} (opt-in)"
    # Where the model's code builds each: its first site, the module's name and line (the path is in `where`).
    first_site = {name: sites.split(", ")[0].rsplit("/", 1)[-1] for name, sites in composition.built_at if sites}
    branch = [f"{name} ({first_site[name]})" if name in first_site else name for name in composition.config_branch]
    name = composition.architecture or composition.model
    article = "an" if name[:1].upper() in "AEIOU" else "a"
    return {
        "layers": ", ".join(sorted(composition.layer_classes)),
        # The text output's detail: the checkpoint's words already name every layer when its branch builds all.
        "its_layers": (
            "them"
            if set(composition.config_branch) == set(composition.layer_classes)
            else f"its {', '.join(sorted(composition.layer_classes))} layers"
        ),
        "model": name,
        # The checkpoint that builds it: one whose config takes the constructor's branch building these layers.
        "checkpoint": (f"{article} {name} checkpoint whose config builds {' and '.join(branch)}" if branch else name),
        "setting": setting,
        "path": composition.path.split(":")[-1],
        "where": composition.where(),
        # The path's guard that lets this model's layers through (kvlint.analysis.census.compositions).
        "guard": f", whose guard lets them through: {composition.guard}" if composition.guard else "",
    }


def counterexamples(rule, node: cst.CSTNode, built, subject: str, function):
    """Of the containers whose layers answer the check True, those that reach it and get another answer than
    their layers (kvlint.analysis.flow.layer_selection.reaching); for the gate of a DCP scaling, which matters only
    under DCP, only those of a checkpoint vLLM accepts under DCP."""
    census = rule.context.project.census
    built = reaching(built, census, rule.hierarchy, node, subject, function, rule.flow.parent, rule.flow.remembered)
    table = rule.context.project.kind_table()
    if table is None or not decides_dcp_factor(rule, node):
        return built
    return accepted_under_dcp(
        built, frozenset(r.label for r in table.rows if r.rejected_under_dcp and not r.is_container)
    )


def decides_dcp_factor(rule, node: cst.CSTNode) -> bool:
    """Whether the check only decides a DCP factor, so that at DCP = 1 both ways give the same: the gate of a
    hand-written scaling (`s.block_size * (dcp if check else 1)`), or the choice between a size and that size
    times the DCP size (`s.block_size * dcp if check else s.block_size`)."""
    if gated_scaling(rule, node) is not None:
        return True
    test, choice = node, rule.flow.parent(node)
    while isinstance(choice, cst.UnaryOperation) and isinstance(choice.operator, cst.Not):
        test, choice = choice, rule.flow.parent(choice)  # `not check` swaps the ways, which are alike at DCP = 1
    if not isinstance(choice, cst.IfExp) or choice.test is not test:
        return False
    aliases = dcp_aliases(rule.context.source)
    for scaled, plain in ((choice.body, choice.orelse), (choice.orelse, choice.body)):
        if not (isinstance(scaled, cst.BinaryOperation) and isinstance(scaled.operator, cst.Multiply)):
            continue
        for size, factor in ((scaled.left, scaled.right), (scaled.right, scaled.left)):
            if is_dcp_size(factor, aliases) and dotted(size) is not None and dotted(size) == dotted(plain):
                return True
    return False


def gated_scaling(rule, node: cst.CSTNode):
    """The hand-written DCP scaling this check gates (`block_size * (dcp if check else 1)`), if any: KV102's
    rewrite of it fixes both."""
    gate = rule.flow.parent(node)
    if not isinstance(gate, cst.IfExp) or gate.test is not node:
        return None
    product = rule.flow.parent(gate)
    if not isinstance(product, cst.BinaryOperation):
        return None
    return match_scaling(product, rule.flow, dcp_aliases(rule.context.source))


def class_level_message(rule, node, subject: str, provenance, checked: frozenset[str], layer: str | None) -> Message:
    """Without a census (no model registry read): the class the tree builds layers of, or unsettled."""
    check = " ".join(rule.code_of(node).split())
    fix = remedy(rule.context.project.interface_functions(), subject, checked)
    if layer is not None:
        where = rule.containers.member_evidence.get(layer, "").split(": ")[0]
        statement = rule.MESSAGE.format(
            check=check,
            layer=layer,
            where=f" (the tree builds such layers: `{where}`)" if where else "",
            subject=subject,
            reason=provenance.reason,
        )
        headline = rule.HEADLINE.format(check=one_line(check), layer=layer)
        detail = rule.DETAIL.format(
            where=f"the tree builds such layers (`{where}`); " if where else "",
            subject=subject,
            reason=provenance.reason,
        )
        return Message(headline, detail, fix, statement=statement)
    classes = ", ".join(sorted(checked))
    detail = rule.UNSETTLED.format(check=check, classes=classes, subject=subject, reason=provenance.reason)
    return Message(rule.UNSETTLED_HEADLINE.format(check=one_line(check)), detail, fix)


class DominatedChecks:
    """Mixed into KV101 (before Rule): a check no container reaches, because an earlier reported check of the
    same spec in the same function sent containers the other way, becomes that finding's related location."""

    DOMINATED = "`{check}` is reached by no container: `{first}` already sent containers the other way"

    def __init__(self, context) -> None:
        super().__init__(context)
        self._checks: dict[tuple[int, str], list[cst.CSTNode]] = {}  # (function, spec) → its reported checks
        self._dominated: dict[int, list[tuple[cst.CSTNode, str]]] = {}  # a reported check → the checks it hides

    def _key(self, node, subject: str) -> tuple[int, str]:
        return id(self.flow.enclosing_function(node)), subject

    def fold_if_dominated(self, node, subject: str) -> bool:
        checks = self._checks.get(self._key(node, subject), ())
        earlier = next((n for n in checks if dominated(n, node, self.flow.parent)), None)
        if earlier is None:
            return False
        check, first = " ".join(self.code_of(node).split()), " ".join(self.code_of(earlier).split())
        self._dominated.setdefault(id(earlier), []).append((node, self.DOMINATED.format(check=check, first=first)))
        return True

    def remember_check(self, node, subject: str) -> None:
        self._checks.setdefault(self._key(node, subject), []).append(node)

    def finding_for(self, pending):
        finding = super().finding_for(pending)
        extra = [related_to(self.context, n, self.CODE, m) for n, m in self._dominated.get(id(pending.node), ())]
        return replace(finding, related=(*finding.related, *extra)) if extra else finding


def could_test_a_container(pre, layer_classes: frozenset[str]) -> bool:
    """KV101's sieve before libcst (kvlint.analysis.ast_candidates.tests_a_layer_class), given Python's parse
    of the file (`pre`, kvlint.engine.preparse) and the classes a container is not an instance of."""
    paths, project = scheduler_only_paths(pre.settings), pre.project
    differ = _census_can_differ(project, pre.module_path)
    return tests_a_layer_class(pre.tree, pre.nodes, pre.module_path, paths, layer_classes, project.containers, differ)


def _census_can_differ(project, module_path: str):
    """Whether a container the census builds, on the platforms of `module_path`, holds only layers a test of
    the given classes answers True (as `isinstance`: a superset of `type(…) is`), before any narrowing around
    the test: else no container is a counterexample. None where there is no census (the class-level reading
    decides, as before)."""
    compositions = project.container_compositions()
    if compositions is None:
        return None
    compositions = project.platform_reach.on(module_path, compositions)
    wide = LayerSelection()

    @cache  # a module tests the same classes again and again (`isinstance(spec, MambaSpec)` in each method)
    def can_differ(tested: frozenset[str]) -> bool:
        return bool(
            built_containers(compositions, project.census, project.hierarchy, judged_as(project, tested), False, wide)
        )

    return can_differ
