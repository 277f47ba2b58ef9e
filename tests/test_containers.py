"""Which spec classes a container can hold, read from a tree's own code, and KV101 trusting it.

Small trees here (a rule example is one file, this needs a tree): the runner appends encoder-only specs as
plain groups (a check for them is correct) or hands them to `from_specs` (a check is reported), and each way
the analysis must give up (fail open). The real releases: 0.29.0-0.34.0 build encoder-only groups plain.
"""

from __future__ import annotations

import ast
import re
import textwrap
from pathlib import Path

import pytest

from kvlint.analysis.containers import NAMING_WORD, container_reachability
from kvlint.analysis.hierarchy import read_hierarchy
from kvlint.analysis.vocabulary import CONTAINER_CLASS, INTERFACE_MODULE
from kvlint.scan.config import Config
from kvlint.scan.index_cache import build_project_index, index_digests
from kvlint.scan.runner import scan
from kvlint.scan.tree_snapshot import could_matter

INTERFACE = """\
class KVCacheSpec: pass
class AttentionSpec(KVCacheSpec): pass
class FullAttentionSpec(AttentionSpec): pass
class EncoderOnlyAttentionSpec(AttentionSpec): pass
class MambaSpec(KVCacheSpec): pass
class UniformTypeKVCacheSpecs(KVCacheSpec):
    @classmethod
    def from_specs(cls, kv_cache_specs): return cls()
class KVCacheGroupSpec:
    def __init__(self, layer_names, kv_cache_spec): pass
"""
LAYER = """\
from vllm.v1.kv_cache_interface import FullAttentionSpec, MambaSpec


class Attention:
    def get_kv_cache_spec(self, vllm_config):
        return FullAttentionSpec()


class Mamba:
    def get_kv_cache_spec(self, vllm_config):
        spec = MambaSpec()
        return spec
"""
# vLLM's own shape (gpu_model_runner.may_add_encoder_only_layers_to_kv_cache_config): a dict keyed by the spec,
# popped into a plain group.
APPENDS_PLAIN = """\
from collections import defaultdict

from vllm.v1.kv_cache_interface import AttentionSpec, EncoderOnlyAttentionSpec, KVCacheGroupSpec


class Runner:
    def may_add_encoder_only_layers_to_kv_cache_config(self):
        specs: dict[AttentionSpec, list[str]] = defaultdict(list)
        for name in self.encoder_only_layers:
            spec: AttentionSpec = EncoderOnlyAttentionSpec()
            specs[spec].append(name)
        if len(specs) > 0:
            assert len(specs) == 1
            spec, layer_names = specs.popitem()
            self.kv_cache_config.kv_cache_groups.append(KVCacheGroupSpec(layer_names=layer_names, kv_cache_spec=spec))
"""
PASSES_FROM_SPECS = """\
from vllm.v1.kv_cache_interface import EncoderOnlyAttentionSpec, KVCacheGroupSpec, UniformTypeKVCacheSpecs


class Runner:
    def add_encoder_only_layers(self):
        specs = {name: EncoderOnlyAttentionSpec() for name in self.encoder_only_layers}
        group_spec = UniformTypeKVCacheSpecs.from_specs(specs)
        self.kv_cache_config.kv_cache_groups.append(KVCacheGroupSpec(list(specs), group_spec))
"""
CHECKS = """\
from vllm.v1.kv_cache_interface import EncoderOnlyAttentionSpec, FullAttentionSpec


class Worker:
    def encoder_groups(self):
        for group in self.kv_cache_config.kv_cache_groups:
            if isinstance(group.kv_cache_spec, EncoderOnlyAttentionSpec):
                yield group

    def full_groups(self):
        for group in self.kv_cache_config.kv_cache_groups:
            if isinstance(group.kv_cache_spec, FullAttentionSpec):
                yield group
"""
RUNNER = "vllm/v1/worker/runner.py"
CHECKER = "vllm/v1/worker/checks.py"


def make_tree(root: Path, runner: str, **more: str) -> Path:
    files = {
        INTERFACE_MODULE: INTERFACE,
        "vllm/model_executor/layers.py": LAYER,
        RUNNER: runner,
        CHECKER: CHECKS,
        **more,
    }
    for relative, text in files.items():
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
    return root


def reachability(root: Path, only=None):
    hierarchy = read_hierarchy(root / INTERFACE_MODULE)
    return container_reachability(
        root, hierarchy, only, interface_module=INTERFACE_MODULE, container_class=CONTAINER_CLASS
    )


def kv101_lines(root: Path, cache: Path | None = None) -> list[tuple[str, int]]:
    result = scan([root / "vllm"], Config(), ["KV101"], [], jobs=1, cache_dir=cache)
    return [(Path(f.path).relative_to(root).as_posix(), f.line) for f in result.findings]


# ------------------------------------------------------------------------------------------ small trees


def test_encoder_only_specs_appended_as_plain_groups_are_no_container_member(tmp_path):
    found = reachability(make_tree(tmp_path, APPENDS_PLAIN))
    assert set(found.evidence) == {"EncoderOnlyAttentionSpec"}
    # the construction site and the group it ends in, for the rule (and a reader) to cite
    assert found.evidence["EncoderOnlyAttentionSpec"] == f"{RUNNER}:10 → `KVCacheGroupSpec(…)` at :15"
    assert found.member_classes == {"KVCacheSpec", "AttentionSpec", "FullAttentionSpec", "MambaSpec"}
    assert not found.may_hold_instance_of("EncoderOnlyAttentionSpec")
    assert found.may_hold_instance_of("AttentionSpec")  # a FullAttentionSpec layer is one
    assert found.may_hold_instance_of("SomeClassTheTreeDoesNotDeclare")
    assert "returned as built" in found.member_evidence["FullAttentionSpec"]
    assert found.member_evidence["MambaSpec"].startswith(
        "vllm/model_executor/layers.py:11: built in `get_kv_cache_spec`"
    )


def test_kv101_reports_encoder_only_checks_only_when_a_container_can_hold_one(tmp_path):
    """VALID: encoder-only specs only ever form plain groups. INVALID: they pass through from_specs."""
    plain = make_tree(tmp_path / "plain", APPENDS_PLAIN)
    assert kv101_lines(plain) == [(CHECKER, 12)]  # the FullAttentionSpec check stays
    merged = make_tree(tmp_path / "merged", PASSES_FROM_SPECS)
    assert reachability(merged).evidence == {}
    assert kv101_lines(merged) == [(CHECKER, 7), (CHECKER, 12)]


def test_an_attention_group_holds_a_group_spec(tmp_path):
    """vLLM's model states build encoder-only specs for an AttentionGroup, never for a layer dict."""
    runner = """\
    from vllm.v1.kv_cache_interface import EncoderOnlyAttentionSpec

    def encoder_groups(layers, groups):
        for key, layer in layers.items():
            if key not in groups:
                spec = EncoderOnlyAttentionSpec()
                groups[key] = AttentionGroup(layer.backend, [], spec, kv_cache_group_id=len(groups))
    """
    found = reachability(make_tree(tmp_path, runner))
    assert found.evidence == {"EncoderOnlyAttentionSpec": f"{RUNNER}:6 → `AttentionGroup(…)` at :7"}


INERT_MENTIONS = """\
from typing import cast

from vllm.v1 import kv_cache_interface
from vllm.v1.kv_cache_interface import AttentionSpec, EncoderOnlyAttentionSpec


def skip(spec: EncoderOnlyAttentionSpec | None, other) -> list[EncoderOnlyAttentionSpec]:
    if isinstance(spec, (AttentionSpec, EncoderOnlyAttentionSpec)) or type(other) is kv_cache_interface.EncoderOnlyAttentionSpec:
        return []
    kept: list[EncoderOnlyAttentionSpec] = [cast(EncoderOnlyAttentionSpec, spec)]
    return kept if issubclass(type(other), EncoderOnlyAttentionSpec | AttentionSpec) else []
"""


def test_mentions_that_build_nothing_keep_a_class_out(tmp_path):
    found = reachability(make_tree(tmp_path, APPENDS_PLAIN, **{"vllm/v1/worker/other.py": INERT_MENTIONS}))
    assert set(found.evidence) == {"EncoderOnlyAttentionSpec"}


ESCAPES = {
    "returned from a helper": """\
        def make():
            spec = EncoderOnlyAttentionSpec()
            return spec
        """,
    "stored on an object": """\
        def keep(self):
            self.spec = EncoderOnlyAttentionSpec()
        """,
    "handed to another call": """\
        def register(registry):
            registry.add(EncoderOnlyAttentionSpec())
        """,
    "put in a layer dict": """\
        def specs(names):
            return {name: EncoderOnlyAttentionSpec() for name in names}
        """,
    "a dict's keys iterated": """\
        def groups(names):
            by_spec = {}
            by_spec[EncoderOnlyAttentionSpec()] = names
            return [spec for spec in by_spec]
        """,
    "the class object handed around": """\
        def pick(kind):
            return {"encoder_only": EncoderOnlyAttentionSpec}[kind]
        """,
    "imported under another name": """\
        from vllm.v1.kv_cache_interface import EncoderOnlyAttentionSpec as Encoder
        """,
    "subclassed outside the interface": """\
        class MyEncoderSpec(EncoderOnlyAttentionSpec):
            pass
        """,
    "built at module level": """\
        DEFAULT = EncoderOnlyAttentionSpec()
        """,
    "a file that does not parse": """\
        def broken(:
            EncoderOnlyAttentionSpec()
        """,
}


@pytest.mark.parametrize("source", ESCAPES.values(), ids=ESCAPES.keys())
def test_a_flow_the_analysis_cannot_follow_keeps_the_class_a_member(tmp_path, source):
    """Fail open: alongside vLLM's plain groups, any construction or mention that may escape keeps KV101 reporting."""
    text = "from vllm.v1.kv_cache_interface import EncoderOnlyAttentionSpec\n\n\n" + textwrap.dedent(source)
    found = reachability(make_tree(tmp_path, APPENDS_PLAIN, **{"vllm/v1/worker/escape.py": text}))
    assert found.evidence == {}
    assert "EncoderOnlyAttentionSpec" in found.member_classes
    assert found.member_evidence["EncoderOnlyAttentionSpec"].startswith("vllm/v1/worker/escape.py")
    assert kv101_lines(tmp_path) == [(CHECKER, 7), (CHECKER, 12)]


def test_a_class_never_built_by_name_is_assumed_a_member(tmp_path):
    found = reachability(make_tree(tmp_path, "def nothing():\n    return None\n"))
    assert found.evidence == {}
    assert (
        found.member_evidence["EncoderOnlyAttentionSpec"] == "never constructed by name in the tree (assumed a member)"
    )


def test_without_a_tree_nothing_is_decided(tmp_path):
    (tmp_path / "alone.py").write_text(CHECKS)
    assert build_project_index([tmp_path / "alone.py"]).containers is None
    hierarchy = read_hierarchy(tmp_path / "missing.py")  # the built-in default
    assert (
        container_reachability(
            tmp_path, hierarchy, interface_module=INTERFACE_MODULE, container_class=CONTAINER_CLASS
        ).member_classes
        is None
    )


def test_only_files_naming_the_interface_are_read_and_they_could_change_the_index(tmp_path):
    root = make_tree(tmp_path, APPENDS_PLAIN)
    files = [p.relative_to(root).as_posix() for p in (root / "vllm").rglob("*.py")]
    only = frozenset(f for f in files if could_matter(f, (root / f).read_bytes()))
    assert RUNNER in only and CHECKER in only
    assert reachability(root, only) == reachability(root)


def test_the_reachability_is_part_of_the_index_digest(tmp_path):
    plain = build_project_index([make_tree(tmp_path / "plain", APPENDS_PLAIN) / "vllm"])
    merged = build_project_index([make_tree(tmp_path / "merged", PASSES_FROM_SPECS) / "vllm"])
    assert plain.containers != merged.containers
    assert index_digests(plain).shared != index_digests(merged).shared


def test_editing_where_specs_go_invalidates_cached_results(tmp_path):
    """The project cache rebuilds the index when a file naming the interface changes; cached findings follow."""
    root = make_tree(tmp_path / "tree", APPENDS_PLAIN)
    cache = tmp_path / "cache"
    assert kv101_lines(root, cache) == [(CHECKER, 12)]
    (root / RUNNER).write_text(PASSES_FROM_SPECS)
    assert kv101_lines(root, cache) == [(CHECKER, 7), (CHECKER, 12)] == kv101_lines(root)
    (root / RUNNER).write_text(APPENDS_PLAIN)
    assert kv101_lines(root, cache) == [(CHECKER, 12)]


def test_built_layer_classes_are_the_counterexamples(tmp_path):
    """A container of layers the tree builds is a counterexample; the checked class itself first."""
    root = make_tree(tmp_path, APPENDS_PLAIN)
    found = reachability(root)
    hierarchy = read_hierarchy(root / INTERFACE_MODULE)
    assert found.built_members == {"FullAttentionSpec", "MambaSpec"}
    assert found.built_layer_class(frozenset({"AttentionSpec"}), hierarchy) == "FullAttentionSpec"
    assert found.built_layer_class(frozenset({"MambaSpec"}), hierarchy) == "MambaSpec"
    assert found.built_layer_class(frozenset({"EncoderOnlyAttentionSpec"}), hierarchy) is None
    assert found.built_layer_class(frozenset({"AttentionSpec"}), hierarchy, exact=True) is None


def test_a_registry_registration_builds_nothing(tmp_path):
    """`KVCacheSpecRegistry.register(Spec, Manager, uniform_type_base_spec=Spec)` keeps the class object to
    look managers up by: it does not make the class a possible member."""
    registry = """\
    from vllm.v1.kv_cache_interface import EncoderOnlyAttentionSpec


    def register_all():
        KVCacheSpecRegistry.register(
            EncoderOnlyAttentionSpec, Manager, uniform_type_base_spec=EncoderOnlyAttentionSpec
        )
    """
    found = reachability(make_tree(tmp_path, APPENDS_PLAIN, **{"vllm/v1/registry.py": registry}))
    assert set(found.evidence) == {"EncoderOnlyAttentionSpec"}
    handed = registry.replace("KVCacheSpecRegistry.register(", "remember(")
    found = reachability(make_tree(tmp_path / "other", APPENDS_PLAIN, **{"vllm/v1/registry.py": handed}))
    assert "EncoderOnlyAttentionSpec" in found.member_evidence  # any other call: fail open


# -------------------------------------------------------------------------------------- real releases

RUNNER_029 = "vllm/v1/worker/gpu_model_runner.py"


@pytest.mark.slow
@pytest.mark.parametrize("version", ["0.29.0", "0.30.0", "0.33.0", "0.34.0"])
def test_real_releases_build_encoder_only_groups_plain(vllm_release, version):
    root = vllm_release(version)
    found = reachability(root)
    # 0.30+: HiSparse specs go straight into their own groups (their registry registration builds nothing).
    hisparse = set() if version == "0.29.0" else {"HiSparseHotSpec", "HiSparseResidentSpec"}
    assert set(found.evidence) == {"EncoderOnlyAttentionSpec", *hisparse}
    sites = found.evidence["EncoderOnlyAttentionSpec"]
    assert "model_states/encoder_only.py" in sites and "`AttentionGroup(…)`" in sites
    if version != "0.34.0":  # 0.34 dropped the runner's own encoder-only group
        assert f"{RUNNER_029}:" in sites and "`KVCacheGroupSpec(…)`" in sites
    for member in (
        "FullAttentionSpec",
        "MLAAttentionSpec",
        "SlidingWindowSpec",
        "CrossAttentionSpec",
        "MambaSpec",
        "HiddenStateCacheSpec",
    ):
        assert member in found.member_classes, member


@pytest.mark.slow
@pytest.mark.parametrize("version", ["0.29.0", "0.34.0"])
def test_real_releases_read_the_same_with_only_the_files_that_could_matter(vllm_release, version):
    """A rebuild from the project cache reads only could-matter files; every file naming a spec class names
    the interface too (the assumption that lets the analysis skip the rest of the tree)."""
    root = vllm_release(version)
    hierarchy = read_hierarchy(root / INTERFACE_MODULE)
    names = re.compile(rb"\b(?:" + b"|".join(re.escape(n.encode()) for n in hierarchy.bases) + rb")\b")
    only = set()
    for path in (root / "vllm").rglob("*.py"):
        relative, data = path.relative_to(root).as_posix(), path.read_bytes()
        if could_matter(relative, data):
            only.add(relative)
        if names.search(data) and NAMING_WORD not in data and relative != INTERFACE_MODULE:
            nodes = list(ast.walk(ast.parse(data)))
            code_names = {n.id for n in nodes if isinstance(n, ast.Name)} | {
                n.attr for n in nodes if isinstance(n, ast.Attribute)
            }
            assert not code_names & set(hierarchy.bases), relative  # a comment may name one
    assert reachability(root, frozenset(only)) == reachability(root)


@pytest.mark.slow
@pytest.mark.parametrize("version", ["0.29.0", "0.34.0"])
def test_parsing_only_the_units_around_mentions_reads_like_whole_modules(vllm_release, version, monkeypatch):
    from kvlint.analysis import containers

    root = vllm_release(version)
    by_units = reachability(root)
    monkeypatch.setattr(containers, "unit_spans", lambda text_lines, lines: None)
    assert reachability(root) == by_units
