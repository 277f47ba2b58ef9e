"""An index rebuilt after an edit keeps the census of the index before it only when nothing the census, its
compositions and the platform reach read has changed: an edit of a connector reuses it, an edit of a layer,
of the grouping code's inputs or of a platform reads it again, and either way the index is the one a fresh
build gives."""

from __future__ import annotations

import pytest

import kvlint.analysis.tree_index as tree_index
from kvlint.analysis.tree_index import build_tree_index
from kvlint.scan.index_cache import open_project_index
from tests.test_compositions import CONNECTOR
from tests.test_platform_reach import CPU_PLATFORM, cpu_tree


def edit(tree, relative: str, old: str, new: str) -> None:
    path = tree / relative
    text = path.read_text()
    assert old in text, (relative, old)
    path.write_text(text.replace(old, new))


def test_an_edit_of_a_connector_keeps_the_census(tmp_path):
    tree = cpu_tree(tmp_path)
    before = build_tree_index(tree)
    assert before.census is not None and before.compositions and before.census_inputs
    (tree / CONNECTOR).write_text(
        (tree / CONNECTOR).read_text() + "\n\ndef spans(spec, dcp):\n    return spec.block_size * dcp\n"
    )
    after = build_tree_index(tree, earlier=before)
    assert after.census is before.census and after.compositions is before.compositions
    assert after.platform_reach is before.platform_reach
    assert after == build_tree_index(tree)


def test_an_edit_of_a_layer_reads_the_census_again(tmp_path):
    tree = cpu_tree(tmp_path)
    before = build_tree_index(tree)
    # The MLA layer builds a full attention spec now: the model's container changes.
    edit(tree, "vllm/model_executor/layers/attention.py", "return MLAAttentionSpec(", "return FullAttentionSpec(")
    after = build_tree_index(tree, earlier=before)
    fresh = build_tree_index(tree)
    assert after == fresh
    assert after.compositions != before.compositions and after.census_inputs != before.census_inputs


def test_an_edit_of_a_platform_reads_the_reach_again(tmp_path):
    tree = cpu_tree(tmp_path)
    before = build_tree_index(tree)
    edit(tree, "vllm/platforms/cpu.py", 'raise NotImplementedError("MLA is not supported on CPU.")', "pass")
    after = build_tree_index(tree, earlier=before)
    assert after == build_tree_index(tree)
    assert after.platform_reach != before.platform_reach


def test_a_new_module_reads_the_census_again(tmp_path):
    # The reach asks whether a module a platform names exists: the listing is one of its inputs.
    tree = cpu_tree(tmp_path)
    before = build_tree_index(tree)
    (tree / "vllm/v1/attention/backends").mkdir(parents=True, exist_ok=True)
    (tree / "vllm/v1/attention/backends/cpu_attn.py").write_text("class CPUAttentionBackend:\n    pass\n")
    after = build_tree_index(tree, earlier=before)
    assert after == build_tree_index(tree)
    assert after.census_inputs != before.census_inputs


def test_the_index_cache_hands_the_kept_index_to_the_rebuild(tmp_path, monkeypatch):
    tree = cpu_tree(tmp_path, CPU_PLATFORM)
    cache = tmp_path / "cache"
    first = open_project_index([tree / CONNECTOR], cache).index
    (tree / CONNECTOR).write_text(
        (tree / CONNECTOR).read_text() + "\n\ndef spans(spec, dcp):\n    return spec.block_size * dcp\n"
    )

    def refused(*args, **kwargs):
        raise AssertionError("the census was read again after an edit it does not read")

    sized = []
    build_sizing_analysis = tree_index.build_sizing_analysis
    monkeypatch.setattr(tree_index, "read_census", refused)
    monkeypatch.setattr(
        tree_index, "build_sizing_analysis", lambda *a, **k: sized.append(1) or build_sizing_analysis(*a, **k)
    )
    second = open_project_index([tree / CONNECTOR], cache).index
    assert sized == [1], "the edit of a connector rebuilds the index"
    assert second.census == first.census and second.compositions == first.compositions
    monkeypatch.undo()
    assert second.census == build_tree_index(tree).census


@pytest.mark.parametrize("damage", ["gone", "garbled"])
def test_a_damaged_kept_index_is_rebuilt_whole(tmp_path, damage):
    tree = cpu_tree(tmp_path)
    cache = tmp_path / "cache"
    assert open_project_index([tree / CONNECTOR], cache).index.census is not None
    [kept] = [p for p in cache.rglob("project-*-index.json")]
    if damage == "gone":
        kept.unlink()
    else:
        kept.write_bytes(kept.read_bytes()[: len(kept.read_bytes()) // 2])
    (tree / CONNECTOR).write_text(
        (tree / CONNECTOR).read_text() + "\n\ndef spans(spec, dcp):\n    return spec.block_size * dcp\n"
    )
    second = open_project_index([tree / CONNECTOR], cache).index
    assert second.census == build_tree_index(tree).census and second.compositions


MODEL = "vllm/model_executor/models/dsa.py"  # read by its folder: only its census fingerprint matters


def census_reads_counted(monkeypatch) -> list[int]:
    reads: list[int] = []
    read_census = tree_index.read_census
    monkeypatch.setattr(tree_index, "read_census", lambda *a, **k: reads.append(1) or read_census(*a, **k))
    return reads


def reads_after_a_connector_edit(tree, cache, monkeypatch) -> list[int]:
    """The census's reads when an edit of a connector rebuilds the cached index; the index is a fresh build's."""
    (tree / CONNECTOR).write_text((tree / CONNECTOR).read_text() + "\n\ndef spans(spec, dcp):\n    return 1\n")
    reads = census_reads_counted(monkeypatch)
    rebuilt = open_project_index([tree / CONNECTOR], cache).index
    monkeypatch.undo()
    assert rebuilt == build_tree_index(tree)
    return reads


def test_a_comment_in_a_model_module_then_an_edit_of_a_connector_keeps_the_census(tmp_path, monkeypatch):
    """The comment leaves the kept index as it is (its census fingerprint is the same); the connector's edit
    rebuilds the index later, and its census is still the one the census's inputs give: not read again, though
    their digest (which hashes the model module's bytes) changed."""
    tree = cpu_tree(tmp_path)
    cache = tmp_path / "cache"
    first = open_project_index([tree / CONNECTOR], cache).index
    (tree / MODEL).write_text((tree / MODEL).read_text() + "# a comment the census does not read\n")  # no line moved
    reads = census_reads_counted(monkeypatch)
    kept = open_project_index([tree / CONNECTOR], cache)
    assert kept._index is None and reads == []  # not stale: answered from the cache, nothing built
    (tree / CONNECTOR).write_text((tree / CONNECTOR).read_text() + "\n\ndef spans(spec, dcp):\n    return 1\n")
    second = open_project_index([tree / CONNECTOR], cache).index
    assert reads == [], "the census was read again after edits it does not read"
    assert second.census_inputs != first.census_inputs
    monkeypatch.undo()
    assert second == build_tree_index(tree)


@pytest.mark.parametrize(
    "relative, old, new",
    [
        (MODEL, "\n", "\nclass ExtraLayer:\n    pass\n"),  # the model module's fingerprint
        ("vllm/model_executor/layers/attention.py", "\n", "\n# read whole\n"),  # a module it reads whole
        ("vllm/platforms/cpu.py", "\n", "\n# the platform\n"),
    ],
    ids=["fingerprint", "census-words", "platform"],
)
def test_an_edit_the_census_reads_then_a_connector_reads_it_again(tmp_path, monkeypatch, relative, old, new):
    tree = cpu_tree(tmp_path)
    cache = tmp_path / "cache"
    assert open_project_index([tree / CONNECTOR], cache).index.census is not None  # built and kept
    edit(tree, relative, old, new)
    assert reads_after_a_connector_edit(tree, cache, monkeypatch) == [1]


def test_a_new_module_after_a_comment_reads_the_census_again(tmp_path, monkeypatch):
    """A new file changes the listing the platform reach reads, mattering to the index or not."""
    tree = cpu_tree(tmp_path)
    cache = tmp_path / "cache"
    assert open_project_index([tree / CONNECTOR], cache).index.census is not None  # built and kept
    (tree / MODEL).write_text((tree / MODEL).read_text() + "# a comment\n")
    (tree / "vllm/v1/attention/backends").mkdir(parents=True, exist_ok=True)
    (tree / "vllm/v1/attention/backends/cpu_attn.py").write_text("class CPUAttentionBackend:\n    pass\n")
    open_project_index([tree / CONNECTOR], cache)
    assert reads_after_a_connector_edit(tree, cache, monkeypatch) == [1]
