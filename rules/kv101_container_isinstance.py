"""## What it does
Finds an `isinstance(spec, AttentionSpec)`-style check (or `type(spec) is …`) against a layer spec class a
`UniformTypeKVCacheSpecs` container is not an instance of (`FullAttentionSpec`, `MambaSpec`) applied to a KV
cache *group* spec that may be such a container, in code that sees a worker's KV cache config.

## Why is this bad?
`UniformTypeKVCacheSpecs` is a `KVCacheSpec` holding one spec per layer; it is not an `AttentionSpec` nor a
`MambaSpec`. DSA models (DeepSeek V3.2, GLM-5.x) merge their MLA and indexer layers into one such group,
and the packed layout builds containers of Mamba layers, so the check answers "not that kind" for them and
the code silently takes the wrong branch — typically dropping the decode-context-parallel factor that the
scheduler, going through `resolve_dcp_kv_block_size`, applies.

What the name holds is read where the check is (flow-sensitive): a group's spec, a name assigned from
one, or a parameter that callers in the same module pass one; a name rebound to a layer (`spec =
_unwrap_spec(spec)`) or known not to be a container (past an `isinstance(spec, UniformTypeKVCacheSpecs)`
test) is a layer spec from there on. Code that only receives the scheduler's config (the scheduler, KV
cache managers, scheduler-side connector halves) never meets a container: the engine flattens it first.

Which containers exist is read from the tree (kvlint.analysis.census.compositions): its models' layers × its
grouping paths. An error when a model builds by default a container whose every layer answers True (the
message names model, layers, path, line and the guard of the path that lets them through); a warning when
only an opt-in setting does (named), or when a link is unproven (named: on one platform's code, a layer
built with a flag that platform refuses, decided at run time); else nothing. A spec-field test in the same
`and` (`s.mamba_type in (…)`) or a layer flag the function picks layers by narrows the layers counted; a
name that holds the spec only when the config has one group (`spec = groups[0].kv_cache_spec if
len(groups) == 1 else None`) is reached only by a container that is the model's only group. The witness
named is a main model before a draft (the registry's speculative-decoding models), then the composition
most of the tree's models build by default, a model whose own module defines one of its layers first. A
proven default is still a warning when no user meets it as a defect: a deliberate fail-closed check (the
way a container takes refuses, and its docstring or comment says it is conservative, fails closed, refuses
or rejects on purpose), or code whose docstring says it exists for benchmarks (analysis.deliberate), quoted.
Not reported: a worker-side answer no one consumes (analysis.flow.consumers), a check no container reaches after an
earlier one (its related location), what an `assert` of test code asserts (the test's expectation: a container
fails it loudly), the gate of a DCP scaling for containers only checkpoints vLLM refuses under DCP build (a
sliding-window MLA layer beside them). Without a model registry, the classes the tree builds layers of stand in.

## Example
```python
for group in kv_cache_config.kv_cache_groups:
    if isinstance(group.kv_cache_spec, FullAttentionSpec):
        zero_blocks(group)
```

## Use instead
```python
for group in kv_cache_config.kv_cache_groups:
    if is_full_attention_spec(group.kv_cache_spec):  # unwraps containers
        zero_blocks(group)
```
or test the layers with `iter_layer_specs(group.kv_cache_spec)`, or, for a token span,
`resolve_dcp_kv_block_size(group.kv_cache_spec, dcp)`. Messages name only the helpers the scanned tree has.

## Fix safety
When the check is the gate of a hand-written DCP scaling (`spec.block_size * (dcp if isinstance(spec,
AttentionSpec) else 1)`), the fix is KV102's rewrite to `resolve_dcp_kv_block_size(spec, dcp)`. Any other
check is rewritten to the scanned tree's own unwrapping idiom: its helper for the checked class
(`is_full_attention_spec(spec)`), else the check on every layer, `all(isinstance(spec, C) for spec in
iter_layer_specs(x))`; a per-spec function handed a group spec inside `all(…)`/`any(…)` gets the layers at
that call instead (`all(f(spec) for group in groups for spec in iter_layer_specs(group.kv_cache_spec))`, as
vLLM 0.30.0 wrote it). A plain spec answers as before; a container, as its layers do. Safe when every
composition of layers a container of the tree can hold answers the check alike for all its layers (then
`any` and `all` agree) and nothing the check lets through reads the spec itself; otherwise unsafe, and the
message names the composition that splits them or the use: the author chooses. No fix in a tree with
neither such a helper nor `iter_layer_specs` (before vLLM 0.29.0), or when no tree was read.
"""

from __future__ import annotations

from dataclasses import replace

import libcst as cst

from kvlint import Example, Message, Rule, Severity
from kvlint.analysis.deliberate import test_assertion
from kvlint.analysis.flow.consumers import unconsumed_divergence
from kvlint.analysis.flow.layer_selection import built_containers, rank_witnesses, selection_at
from kvlint.analysis.flow.provenance import Kind, dotted
from kvlint.analysis.own_specs import judged_as, judged_note
from kvlint.analysis.plugin_roles import OutsideRoles
from kvlint.analysis.scaling import class_names
from kvlint.analysis.vocabulary import CONTAINER_CLASS, scheduler_only_paths, sees_only_scheduler_config
from kvlint.rules._container_remedy import (
    DominatedChecks,
    built_by,
    class_level_message,
    could_test_a_container,
    counterexamples,
    gated_scaling,
    unmet_defect,
    with_remedy,
)
from kvlint.rules._kv101_examples import CENSUS_VALID_EXAMPLES, UNWRAP_EXAMPLES, WARNING_EXAMPLES
from kvlint.rules._resolver_call import resolver_call_fix
from kvlint.rules._scaling_verdict import one_line
from kvlint.rules._unwrap_fix import target_fix_gap, unwrap_fix, unwrap_plan


def _layer_classes(hierarchy) -> frozenset[str]:
    """Every class a container is not itself an instance of: a test of one can tell it from its layers."""
    return frozenset(hierarchy.bases) - (hierarchy.ancestors(CONTAINER_CLASS) | {CONTAINER_CLASS})


class ContainerIsinstance(DominatedChecks, Rule):
    __doc__ = __doc__
    CODE = "KV101"
    NAME = "container-isinstance"
    # kvlint.engine.grouping: a check folds into the decision it sits in, else stands alone.
    ROOT_CAUSE_ROLE = "check"
    MESSAGE = (
        "`{check}` is False for a UniformTypeKVCacheSpecs of {layer} layers{where} while each layer answers "
        "True, and `{subject}` is {reason}, unflattened here: such a group takes the other branch"
    )
    # When the tree's models and grouping paths were read: the model and path that build the counterexample.
    BUILT = (
        "`{check}` is False for a UniformTypeKVCacheSpecs of {layers} layers while each layer answers True: "
        "{checkpoint}{setting} has them put in one container by `{path}` ({where}){guard}; `{subject}` is {reason}, "
        "unflattened here: such a group takes the other branch"
    )
    # When no container of the checked classes is proven built (no tree read, or the tree cannot settle it).
    UNSETTLED = (
        "`{check}` is False for a UniformTypeKVCacheSpecs container, and `{subject}` may be one ({reason}, "
        "seen here unflattened); whether a container of {classes} layers reaches it is not settled here"
    )
    # The first line of the text output: what is wrong, for which kind (the message says why and where from).
    HEADLINE = "`{check}` is False for a container of {layer} layers"
    DETAIL = (
        "each layer answers True; {where}`{subject}` is {reason}, unflattened here: such a group takes the other branch"
    )
    UNSETTLED_HEADLINE = "`{check}` is False for a container that may reach it"
    BUILT_HEADLINE = "`{check}` is False for {model}'s container of {spec} layers{setting}"
    BUILT_DETAIL = (
        "each layer answers True: {checkpoint}{setting} has {its_layers} put in one container by `{path}` "
        "({where}){guard}; `{subject}` is {reason}, unflattened here: such a group takes the other branch"
    )
    FIX_TITLE = "Test every layer with the tree's unwrapping idiom (`is_full_attention_spec`, `iter_layer_specs`)"
    # A group spec only arises from a group list or a KVCacheGroupSpec in the same module.
    TRIGGERS = (("kv_cache_groups", "transfer_groups", "KVCacheGroupSpec"), ("isinstance(", "type("), ("Spec",))

    VALID = [
        Example(
            """
            def page_sizes(kv_cache_config):
                for group in kv_cache_config.kv_cache_groups:
                    for spec in iter_layer_specs(group.kv_cache_spec):
                        if isinstance(spec, AttentionSpec):  # a layer's spec: never a container
                            yield spec.page_size_bytes
            """
        ),
        Example(
            """
            def layer_is_mla(layer_to_spec, layer_name):
                return isinstance(layer_to_spec[layer_name], MLAAttentionSpec)
            """
        ),
        Example(
            """
            class FooConnectorScheduler:
                def __init__(self, kv_cache_config):
                    # the scheduler's config is flattened: no containers here
                    self.hma = any(
                        not isinstance(g.kv_cache_spec, FullAttentionSpec)
                        for g in kv_cache_config.kv_cache_groups
                    )
            """
        ),
        Example(
            """
            def first(group):
                spec = group.kv_cache_spec
                if isinstance(spec, UniformTypeKVCacheSpecs):
                    spec = next(iter(spec.kv_cache_specs.values()))
                return isinstance(spec, AttentionSpec)  # unwrapped first
            """
        ),
        Example(
            """
            def _unwrap_spec(spec):
                if isinstance(spec, UniformTypeKVCacheSpecs):
                    return next(iter(spec.kv_cache_specs.values()))
                return spec

            def _coverage_spec(spec):
                spec = _unwrap_spec(spec)  # a layer spec from this line on
                return isinstance(spec, SlidingWindowSpec)

            def coverage(self):
                return [_coverage_spec(g.kv_cache_spec) for g in self.kv_cache_groups]
            """
        ),
        Example(
            """
            def windows(kv_cache_config):
                for group in kv_cache_config.kv_cache_groups:
                    spec = group.kv_cache_spec
                    if isinstance(spec, UniformTypeKVCacheSpecs):
                        continue  # containers are handled elsewhere
                    if isinstance(spec, SlidingWindowSpec):
                        yield spec.sliding_window
            """
        ),
        Example(
            """
            def group_zeroing(kv_cache_config):
                for group in kv_cache_config.kv_cache_groups:
                    if isinstance(group.kv_cache_spec, FullAttentionSpec):
                        yield group
            """,
            path="vllm/v1/core/kv_cache_coordinator.py",
        ),
        Example(
            """
            def encoder_groups(kv_cache_config):
                # the runner appends encoder-only specs as plain groups: no container holds one
                return [g for g in kv_cache_config.kv_cache_groups if isinstance(g.kv_cache_spec, EncoderOnlyAttentionSpec)]
            """
        ),
        *CENSUS_VALID_EXAMPLES,  # the census: no model builds it, or no one consumes its answer
        Example(
            """
            def same_kind(kv_cache_config, reference: KVCacheSpec):
                # a class computed at run time: nothing to compare with the spec family
                return [g for g in kv_cache_config.kv_cache_groups if isinstance(g.kv_cache_spec, type(reference))]
            """
        ),
    ]
    INVALID = [
        *UNWRAP_EXAMPLES,  # with the fixes of rules/_unwrap_fix.py
        Example(
            """
            from vllm.v1.kv_cache_interface import AttentionSpec

            def spans(kv_cache_config, dcp):
                return [
                    g.kv_cache_spec.block_size * (dcp if isinstance(g.kv_cache_spec, AttentionSpec) else 1)
                    for g in kv_cache_config.kv_cache_groups
                ]
            """,
            fixed="""
            from vllm.v1.core.kv_cache_utils import resolve_dcp_kv_block_size

            def spans(kv_cache_config, dcp):
                return [
                    resolve_dcp_kv_block_size(g.kv_cache_spec, dcp)
                    for g in kv_cache_config.kv_cache_groups
                ]
            """,
            severity=Severity.ERROR,
        ),
        Example(
            """
            def single_group(kv_cache_config):
                spec = kv_cache_config.kv_cache_groups[0].kv_cache_spec
                return type(spec) is FullAttentionSpec
            """,
            severity=Severity.ERROR,
        ),
        Example(
            """
            def startup_fill_group_ids(kv_cache_config):
                ids = set()
                for group_idx, group in enumerate(kv_cache_config.kv_cache_groups):
                    spec = group.kv_cache_spec
                    if any(isinstance(s, CircularBufferSpec) for s in iter_layer_specs(spec)):
                        continue  # one look at the layers: `spec` itself is still the group's
                    if isinstance(spec, AttentionSpec):
                        continue
                    ids.add(group_idx)
                return ids
            """,
            severity=Severity.ERROR,
        ),
        Example(
            """
            def mamba_groups(kv_cache_config):
                # the packed layout merges Mamba layers into one group spec
                return [g for g in kv_cache_config.kv_cache_groups if isinstance(g.kv_cache_spec, MambaSpec)]
            """,
            severity=Severity.ERROR,
        ),
        Example(
            """
            def init_ssu_backend(kv_cache_config):
                # Mamba1/Mamba2 layers only: grouped together only under an opt-in layout
                if not any(
                    isinstance(g.kv_cache_spec, MambaSpec) and g.kv_cache_spec.mamba_type in (E.MAMBA1, E.MAMBA2)
                    for g in kv_cache_config.kv_cache_groups
                ):
                    return
            """,
            severity=Severity.WARNING,
        ),
        *WARNING_EXAMPLES,  # a guarded use through a walrus; no tree read (rules/_kv101_examples.py)
    ]

    could_report = classmethod(lambda cls, pre: could_test_a_container(pre, _layer_classes(pre.project.hierarchy)))

    def __init__(self, context):
        super().__init__(context)
        self.hierarchy = context.project.hierarchy
        self.layer_classes = _layer_classes(self.hierarchy)
        # None (no tree read): any class may be a container's member, and none is proven built.
        self.containers = context.project.containers
        self.patterns = scheduler_only_paths(context.settings)
        self.roles = OutsideRoles(context)
        # (function, spec, counterexample) already reported: one finding per cause, not one per check.
        self.reported: set[tuple[int, str, str]] = set()

    def visit_Call(self, node: cst.Call) -> None:
        if isinstance(node.func, cst.Name) and node.func.value == "isinstance" and len(node.args) == 2:
            self._check(node, node.args[0].value, node.args[1].value, exact=False)

    def visit_Comparison(self, node: cst.Comparison) -> None:
        # `type(spec) is FullAttentionSpec` / `type(spec) == …` / `type(spec) in (…)`
        left = node.left
        if not (isinstance(left, cst.Call) and isinstance(left.func, cst.Name) and left.func.value == "type"):
            return
        if len(left.args) != 1 or len(node.comparisons) != 1:
            return
        target = node.comparisons[0]
        if isinstance(target.operator, (cst.Is, cst.Equal, cst.In, cst.IsNot, cst.NotEqual, cst.NotIn)):
            self._check(node, left.args[0].value, target.comparator, exact=True)

    def _check(
        self, node: cst.CSTNode, subject: cst.BaseExpression, classes_node: cst.BaseExpression, exact: bool
    ) -> None:
        named = class_names(classes_node) or frozenset()
        tested = named & self.layer_classes
        if not tested or CONTAINER_CLASS in named:
            return  # nothing a container answers differently from its layers, or the test admits containers
        checked = judged_as(self.context.project, tested)  # a plugin's own spec class: as the target's it derives from
        if not checked or self.containers is not None and not any(map(self.containers.may_hold_instance_of, checked)):
            return  # no container the tree builds holds such a layer: its False is every layer's answer too
        if test_assertion(self.context.module_path, node, self.flow.parent):
            return  # a test's expectation of its fixture: a container fails the test loudly, nothing is sized by it
        provenance = self.flow.classify(subject)
        if provenance.kind is not Kind.GROUP_SPEC:
            return
        subject_code = dotted(subject)
        if self.flow.checks_for_container(node, subject_code):
            return
        classes = self.flow.enclosing_class_names(node)
        if sees_only_scheduler_config(self.context.module_path, classes, self.patterns) or self.roles.scheduler_side(
            node
        ):
            return  # its config is the scheduler's: by its path, or (outside the tree) what its class derives from
        if any(name in self.context.project.scheduler_built for name in classes):
            return  # only scheduler-only code builds this class: it is handed the flattened config
        if unconsumed_divergence(node, self.flow, self.context.project.scheduler_consumed):
            return  # only the worker side meets the container, and its answer changes no outcome
        compositions = self.context.project.container_compositions()
        if compositions is not None:
            # The tree's models and grouping paths were read: a container some model builds, or nothing.
            function = self.flow.enclosing_function(node)
            selection = selection_at(node, subject_code, self.flow.parent, function, self.flow.remembered)
            census = self.context.project.census
            # On one platform's code: what it refuses dropped, what it may refuse only possible.
            compositions = self.context.project.platform_reach.on(self.context.module_path, compositions)
            built = built_containers(compositions, census, self.hierarchy, checked, exact, selection)
            # Only containers the group count lets reach the check, and whose whole answer differs.
            built = counterexamples(self, node, built, subject_code, function)
            if not built:
                return
            counterexample = rank_witnesses(built, census)[0]
            key = (id(function), subject_code, ",".join(sorted(counterexample.layer_classes)))
            message = self._built_message(node, subject_code, provenance, counterexample)
            severity = Severity.ERROR if counterexample.is_default else Severity.WARNING
            if severity is Severity.ERROR:
                message, severity = unmet_defect(self, node, function, message)
        else:
            layer = self.containers.built_layer_class(checked, self.hierarchy, exact) if self.containers else None
            key = (id(self.flow.enclosing_function(node)), subject_code, layer or ",".join(sorted(checked)))
            message = class_level_message(self, node, subject_code, provenance, checked, layer)
            severity = Severity.ERROR if layer is not None else Severity.WARNING
        if self.fold_if_dominated(node, subject_code) or key in self.reported:
            return  # no container gets here (the earlier check's wrong answer, not one of its own), or said
        self.reported.add(key)
        self.remember_check(node, subject_code)
        # A gate of a hand-written scaling takes KV102's rewrite; any other check, the tree's unwrapping idiom.
        scaling = gated_scaling(self, node)
        plan = None if scaling is not None else unwrap_plan(self, node, subject, classes_node, exact)
        fix = lambda: resolver_call_fix(self, scaling) if scaling else unwrap_fix(self, plan)  # noqa: E731 - needs positions
        whole = one_line(self.code_of(subject), None)  # the remedy is copied: whole (`subject_code` shortens `[…]`)
        guarded = plan.guarded_use if plan is not None else None  # no helper that lets a container through
        message = with_remedy(self, node, message, whole, tested, guarded)
        note = plan.note(" ".join(self.code_of(node, own_parentheses=False).split())) if plan is not None else ""
        for said in filter(None, (note, judged_note(self.context.project, tested))):
            message = replace(message, remedy=f"{message.remedy}; {said}")
        gap = target_fix_gap(self.context.project, plan, scaling is not None)  # a targeted release lacks the import
        self.report(node, message, fix=fix, severity=severity, fix_unavailable=gap)

    def _built_message(self, node, subject: str, provenance, built) -> Message:
        check = " ".join(self.code_of(node, own_parentheses=False).split())
        fields = {**built_by(built), "spec": ", ".join(sorted(built.spec_classes))}
        statement = self.BUILT.format(check=check, subject=subject, reason=provenance.reason, **fields)
        headline = self.BUILT_HEADLINE.format(check=one_line(check), **fields)
        detail = self.BUILT_DETAIL.format(subject=subject, reason=provenance.reason, **fields)
        return Message(headline, detail, "", statement=statement)  # the remedy is added where it is reported
