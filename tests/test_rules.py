"""Every rule's VALID/INVALID examples run as tests; each rule's docs have ruff's sections."""

from __future__ import annotations

import pytest

from kvlint.analysis.census.compositions import ContainerComposition
from kvlint.analysis.census.reading import Census, LayerClass, Model
from kvlint.analysis.containers import ContainerReachability
from kvlint.analysis.hierarchy import BUILTIN_BASES, SpecHierarchy
from kvlint.analysis.tree_index import TreeIndex
from kvlint.engine.lint import LintRequest, lint_bytes, lint_text
from kvlint.engine.registry import all_rules
from kvlint.engine.rule import Example
from kvlint.fixing.apply import apply_fixes
from kvlint.types import Severity

SECTIONS = ("## What it does", "## Why is this bad?", "## Example", "## Use instead", "## Fix safety")


# What vLLM 0.29.0's code lets a container hold: every layer class its layers build, not the encoder-only
# spec its runner appends as a plain group (tests/test_containers.py reads this from the real tree).
_BUILT = frozenset(BUILTIN_BASES) - {
    "KVCacheSpec",
    "AttentionSpec",
    "UniformTypeKVCacheSpecs",
    "EncoderOnlyAttentionSpec",
}
EXAMPLE_CONTAINERS = ContainerReachability(
    member_classes=frozenset(BUILTIN_BASES) - {"EncoderOnlyAttentionSpec"},
    evidence={"EncoderOnlyAttentionSpec": "vllm/v1/worker/gpu_model_runner.py:7608 → `KVCacheGroupSpec(…)` at :7622"},
    member_evidence={name: f"vllm/model_executor/layers/{name}.py:1: returned as built" for name in _BUILT},
    built_members=_BUILT,
)


# The census of a vLLM 0.34.0-like tree: a DSA model's MLA + indexer in one container and its delta-net state
# packed by default (its indexer allows only a block-outermost layout); Mamba2 and cross-attention layers
# packed only under an opt-in layout (tests/test_compositions.py reads such a census from a miniature tree).
_SINGLE = "vllm/v1/core/kv_cache_planning.py:get_kv_cache_groups"
_PACKED = "vllm/v1/core/kv_cache_planning.py:_get_packed_kv_cache_groups"
_OPT_IN = "opt-in: VLLM_KV_CACHE_LAYOUT=BLHNC (a block-outermost layout) with mixed page sizes"


def _layer(name, spec, fields=(), flag="False", layouts=None):
    return LayerClass(
        name,
        f"vllm/model_executor/layers/{name}.py:1",
        frozenset({spec}),
        fields,
        (("use_flashinfer_replayssm", flag),),
        layouts,
    )


EXAMPLE_CENSUS = Census(
    layers=(
        _layer("MLAAttention", "MLAAttentionSpec"),
        _layer("IndexerCache", "MLAAttentionSpec", layouts=("BLHNC",)),
        _layer("Attention", "FullAttentionSpec"),
        _layer("SinkAttention", "FullAttentionSpec"),
        _layer("DeltaNet", "MambaSpec", (("mamba_type", "GDN_ATTN"),)),
        _layer("Mamba2Mixer", "MambaSpec", (("mamba_type", "MAMBA2"),), flag="?"),
        _layer("CrossAttention", "CrossAttentionSpec"),
    ),
    models=(
        Model(
            "KimiK3ForConditionalGeneration",
            "vllm/models/kimi_k3/__init__.py",
            frozenset({"MLAAttention", "IndexerCache", "DeltaNet"}),
        ),
    ),
    block_outermost=frozenset({"BLHNC"}),
    layout_setting="VLLM_KV_CACHE_LAYOUT",
)
EXAMPLE_COMPOSITIONS = (
    ContainerComposition(
        frozenset({"MLAAttention", "IndexerCache"}),
        frozenset({"MLAAttentionSpec"}),
        "default",
        "DeepseekV32ForCausalLM",
        _SINGLE,
        1187,
    ),
    ContainerComposition(
        frozenset({"Attention", "SinkAttention"}),
        frozenset({"FullAttentionSpec"}),
        "default",
        "PanguForCausalLM",
        _SINGLE,
        1187,
    ),
    ContainerComposition(
        frozenset({"DeltaNet"}), frozenset({"MambaSpec"}), "default", "KimiK3ForConditionalGeneration", _PACKED, 990
    ),
    ContainerComposition(
        frozenset({"Mamba2Mixer"}), frozenset({"MambaSpec"}), _OPT_IN, "NemotronHForCausalLM", _PACKED, 990
    ),
    ContainerComposition(
        frozenset({"CrossAttention"}),
        frozenset({"CrossAttentionSpec"}),
        _OPT_IN,
        "WhisperForConditionalGeneration",
        _PACKED,
        990,
    ),
)


def project_for(example) -> TreeIndex:
    """The tree an example is linted in: vLLM 0.29.0's, or one without the resolver that kvlint cannot read."""
    hierarchy = SpecHierarchy(bases=dict(BUILTIN_BASES))
    if example.tree_functions is not None:
        hierarchy = SpecHierarchy(
            bases=dict(BUILTIN_BASES), functions=frozenset(example.tree_functions), layer_helpers={}
        )
    if not example.has_resolver:
        return TreeIndex(root=None, hierarchy=hierarchy)
    return TreeIndex(
        root=None,
        hierarchy=hierarchy,
        resolver_module="vllm.v1.core.kv_cache_utils",
        resolver_path="vllm/v1/core/kv_cache_utils.py",
        resolver_layer_classes=frozenset({"AttentionSpec"}),
        containers=EXAMPLE_CONTAINERS,
        census=EXAMPLE_CENSUS,
        compositions=EXAMPLE_COMPOSITIONS,
        scheduler_consumed=frozenset({"supports_divergent_local_hybrid_hits"}),
    )


def lint_example(rule, example):
    if getattr(rule, "ENGINE_ONLY", False):
        # Reported by the engine as it reads and parses the file's bytes, which it parses only for a rule
        # that needs them: every rule runs.
        request = LintRequest(example.path, example.path, project_for(example), tuple(all_rules()))
        return lint_bytes(request, example.source.encode())
    request = LintRequest(example.path, example.path, project_for(example), (rule,))
    return lint_text(request, example.source)


def cases(kind):
    for rule in all_rules():
        for index, example in enumerate(getattr(rule, kind)):
            yield pytest.param(rule, example, id=f"{rule.CODE}-{kind.lower()}-{index}")


@pytest.mark.parametrize("rule,example", list(cases("VALID")))
def test_valid_example_is_not_flagged(rule, example):
    result = lint_example(rule, example)
    assert [f for f in result.findings if f.code == rule.CODE] == []


@pytest.mark.parametrize("rule,example", list(cases("INVALID")))
def test_invalid_example_is_flagged_and_fixed_as_documented(rule, example):
    result = lint_example(rule, example)
    own = [f for f in result.findings if f.code == rule.CODE]
    assert own, f"{rule.CODE} did not flag:\n{example.source}"
    for finding in own:
        assert finding.message and "\n" not in finding.message
        assert not finding.message.startswith("Message("), finding.message  # the text, never the record
        if example.severity is not None:
            assert finding.severity == example.severity, finding.message
    if example.fixed_source is not None:
        outcome = apply_fixes(example.source, list(result.findings), unsafe=example.unsafe)
        assert outcome.text == example.fixed_source
        if not example.unsafe:
            # a safe example must not need --unsafe-fixes
            assert all(f.fix.applicability.value == "safe" for f in outcome.applied)
        else:
            assert apply_fixes(example.source, list(result.findings), unsafe=False).text == example.source
        again = lint_text(LintRequest(example.path, example.path, project_for(example), (rule,)), outcome.text)
        assert not [f for f in again.findings if f.fix is not None], "fix is not idempotent"
    elif example.has_resolver and rule.CODE != "KV101":
        assert all(f.fix is None for f in own)
    if example.tree_functions == ():
        assert all(f.fix is None for f in own), "a tree without an unwrapping idiom gets no fix"


@pytest.mark.parametrize("rule", all_rules(), ids=lambda r: r.CODE)
def test_rule_documentation_has_every_section(rule):
    doc = rule.documentation()
    for section in SECTIONS:
        assert section in doc, f"{rule.CODE} lacks {section!r}"
    assert rule.VALID and rule.INVALID, f"{rule.CODE} needs examples"


def test_codes_are_unique_and_named():
    codes = [r.CODE for r in all_rules()]
    assert len(codes) == len(set(codes))
    assert {"KV000", "KV101", "KV102"} <= set(codes)
    for rule in all_rules():
        assert rule.NAME == rule.NAME.lower() and " " not in rule.NAME


def test_rule_modules_are_named_for_their_codes():
    from kvlint.engine.registry import rule_class, rule_codes

    assert rule_codes() == tuple(sorted(r.CODE for r in all_rules()))
    for code in rule_codes():
        assert rule_class(code).CODE == code


def _sources(tree):
    for path in sorted((tree / "vllm").rglob("*.py")):
        yield path, path.read_bytes().decode("utf-8", "replace")


@pytest.mark.slow
@pytest.mark.parametrize("version", ["0.29.0", "0.33.0"])
def test_triggers_are_necessary_for_could_match(vllm_release, version):
    """A scan answered from the cache settles a changed file by TRIGGERS alone: `could_match` may only narrow them."""
    from kvlint.engine.prefilter import triggers_match

    rules = [r for r in all_rules() if not getattr(r, "ENGINE_ONLY", False)]
    assert all(r.TRIGGERS for r in rules), "every rule that reads source declares its triggers"
    assert not any(r.TRIGGERS for r in all_rules() if getattr(r, "ENGINE_ONLY", False)), (
        "the prefilter never selects engine-only rules"
    )
    texts = [(str(path), text) for path, text in _sources(vllm_release(version))]
    texts += [(f"{r.CODE} example", e.source) for r in rules for e in (*r.VALID, *r.INVALID)]
    accepted = 0
    for rule in rules:
        for name, text in texts:
            if rule.could_match(text):
                accepted += 1
                assert triggers_match(rule.TRIGGERS, text), (
                    f"{rule.CODE}.could_match accepts {name}, which its TRIGGERS {rule.TRIGGERS} reject"
                )
    assert accepted > 100, "the real tree exercises the prefilters"


def test_kv102_says_when_the_dcp_size_comes_from_the_caller():
    """A size handed in may already be per kind (vLLM's coordinator passes one): the message must not claim
    that Mamba state gets scaled; one read from the configuration does scale every kind."""
    from kvlint.engine.registry import rule_class

    rule = rule_class("KV102")
    handed = Example(
        """
        class Manager:
            def __init__(self, kv_cache_spec, dcp_world_size):
                self.block_size = kv_cache_spec.block_size
                self.block_size *= dcp_world_size
        """,
        path="vllm/v1/core/foo_manager.py",
    )
    read = Example(
        """
        def span(kv_cache_spec, vllm_config):
            dcp_world_size = vllm_config.parallel_config.decode_context_parallel_size
            return kv_cache_spec.block_size * dcp_world_size
        """,
        path="vllm/v1/core/foo_manager.py",
    )
    [from_caller] = lint_example(rule, handed).findings
    [from_config] = lint_example(rule, read).findings
    assert from_caller.severity == Severity.WARNING
    assert "`dcp_world_size` comes from the callers of `__init__()`" in from_caller.message
    assert "if `dcp_world_size` is the plain DCP size, a MambaSpec group gets 32" in from_caller.message
    assert "whatever the spec kind" not in from_caller.message
    assert from_config.severity == Severity.ERROR
    assert "the DCP size for every kind" in from_config.message and "MambaSpec group" in from_config.message


def test_kv102_a_size_subclasses_hand_on_packed_or_by_name_still_comes_from_the_callers():
    """vLLM 0.29.0's managers: subclasses call `super().__init__(spec, **kwargs)` (the size arrives packed, not
    as the parameter's default of 1) and one forwards `dcp_world_size=dcp_world_size` (its own parameter, from
    its own callers): neither makes the calls "pass different sizes"."""
    from kvlint.engine.registry import rule_class

    rule = rule_class("KV102")
    managers = Example(
        """
        class Manager:
            def __init__(self, kv_cache_spec, dcp_world_size: int = 1):
                self.block_size = kv_cache_spec.block_size
                if dcp_world_size > 1:
                    self.block_size *= dcp_world_size

        class SlidingManager(Manager):
            def __init__(self, kv_cache_spec, **kwargs):
                super().__init__(kv_cache_spec, **kwargs)

        class SinkManager(Manager):
            def __init__(self, kv_cache_spec, dcp_world_size: int = 1):
                super().__init__(kv_cache_spec, dcp_world_size=dcp_world_size)
        """,
        path="vllm/v1/core/foo_manager.py",
    )
    [finding] = lint_example(rule, managers).findings
    assert finding.severity == Severity.WARNING
    assert "`dcp_world_size` comes from the callers of `__init__()`" in finding.message, finding.message
    assert "different sizes" not in finding.message
