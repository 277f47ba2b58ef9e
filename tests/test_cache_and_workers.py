"""The result cache and the process pool change how fast a scan is, never what it finds.

On real vLLM 0.29.0 (slow): one worker or two, no cache, a cold cache and a warm one all give the same
results. On the miniature tree the CLI tests use: what invalidates an entry (content, configuration, rule selection, the
project index), what does not (a `touch`), and that a broken cache is an empty one.
"""

from __future__ import annotations

import json
import os
import pickle
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from kvlint.analysis.hierarchy import SpecHierarchy
from kvlint.analysis.sizing.results import SizingAnalysis
from kvlint.analysis.tree_index import TreeIndex
from kvlint.scan import index_cache, runner
from kvlint.scan import jobs as scan_jobs
from kvlint.scan import progress as progress_line
from kvlint.scan.config import Config
from kvlint.scan.index_cache import index_digests
from kvlint.scan.result_cache import ResultCache, configuration_key
from kvlint.scan.runner import scan
from kvlint.scan.storage import FileStat, load_record, save_record, stable_repr

# The miniature vLLM tree (hierarchy, resolver) and fixture sources the CLI tests use.
from test_cli import BUGGY, CLEAN, INTERFACE, RESOLVER  # noqa: E402

# A KV101 finding that no cross-file sizing analysis looks at: editing it in rebuilds the project index (the
# file names kv_cache_interface) to the same digests, so the other files' results stay cached.
ISINSTANCE = """\
from vllm.v1.kv_cache_interface import FullAttentionSpec


def zero(kv_cache_config):
    for group in kv_cache_config.kv_cache_groups:
        if isinstance(group.kv_cache_spec, FullAttentionSpec):
            group.zero()
"""


@pytest.fixture(autouse=True)
def own_cache_key(tmp_path_factory, monkeypatch):
    """Each test signs its caches with a key of its own (scan/signing.py), never the user's."""
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path_factory.mktemp("state")))


def make_tree(root: Path, buggy_copies: int = 2) -> Path:
    """A miniature vLLM tree: its spec hierarchy, the shared resolver, a few buggy and clean modules."""
    (root / "vllm" / "v1" / "core").mkdir(parents=True)
    (root / "vllm" / "v1" / "kv_cache_interface.py").write_text(INTERFACE)
    (root / "vllm" / "v1" / "core" / "kv_cache_utils.py").write_text(RESOLVER)
    connectors = root / "vllm" / "connectors"
    connectors.mkdir()
    for number in range(buggy_copies):
        (connectors / f"buggy_{number}.py").write_text(BUGGY)
    (connectors / "clean.py").write_text(CLEAN)
    (root / "vllm" / "models").mkdir()
    (root / "vllm" / "models" / "model.py").write_text(CLEAN)
    return root


def run(tree: Path, cache: Path | None, jobs: int = 1, config: Config | None = None, select=None, **kwargs):
    return scan([tree / "vllm"], config or Config(), select, [], jobs=jobs, cache_dir=cache, **kwargs)


def outcome(result) -> tuple:
    """Everything a scan reports, in a comparable form."""
    return tuple(result.files), tuple(result.findings), stable_repr(result.project)


def age(path: Path, seconds: float = 60) -> None:
    """Move a file's mtime into the past: a file modified just now is not trusted by its stat alone."""
    stat = path.stat()
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns - int(seconds * 1e9)))


def age_tree(tree: Path) -> None:
    for path in tree.rglob("*.py"):
        age(path)


# ------------------------------------------------------------------------------------ real vLLM 0.29.0


@pytest.fixture(scope="module")
def vllm_029(vllm_release) -> Path:
    return vllm_release("0.29.0")


@pytest.mark.slow
def test_workers_and_cache_agree_on_real_vllm(vllm_029, tmp_path):
    cache = tmp_path / "cache"
    inline = run(vllm_029, None, jobs=1)
    cold = run(vllm_029, cache, jobs=2)
    warm = run(vllm_029, cache, jobs=2)
    warm_inline = run(vllm_029, cache, jobs=1)

    assert len(inline.files) > 2000 and inline.findings, "the real tree has known findings"
    assert outcome(cold) == outcome(inline)
    assert outcome(warm) == outcome(inline)
    assert outcome(warm_inline) == outcome(inline)
    assert cold.cache_hits == 0
    assert warm.cache_hits == warm_inline.cache_hits == len(inline.files)


# ------------------------------------------------------------------------------------ small trees


@pytest.fixture
def tree(tmp_path) -> Path:
    root = make_tree(tmp_path / "tree")
    age_tree(root)
    return root


def test_warm_scan_reads_no_source_file(tree, tmp_path, monkeypatch):
    cache = tmp_path / "cache"
    uncached = run(tree, None)
    cold = run(tree, cache)
    assert cold.findings and cold.cache_hits == 0

    def no_reading(path, display):
        raise AssertionError(f"{display} was read on a warm scan")  # pragma: no cover

    monkeypatch.setattr(runner, "read_source", no_reading)
    warm = run(tree, cache)
    assert warm.cache_hits == len(warm.files) == len(cold.files)
    assert outcome(warm) == outcome(cold) == outcome(uncached)


def test_display_root_scans_as_from_inside_the_tree(tree, monkeypatch):
    rooted = scan([Path("vllm")], Config(), None, [], jobs=1, display_root=tree)
    monkeypatch.chdir(tree)
    inside = scan([Path("vllm")], Config(), None, [], jobs=1)
    assert rooted.findings and all(f.path.startswith("vllm/") for f in rooted.findings)
    assert outcome(rooted) == outcome(inside)


def test_touch_without_change_is_answered_by_content_hash(tree, tmp_path):
    cache = tmp_path / "cache"
    cold = run(tree, cache)
    for path in (tree / "vllm").rglob("*.py"):
        path.touch()
    touched = run(tree, cache)
    assert touched.cache_hits == len(cold.files)
    assert outcome(touched) == outcome(cold)


def test_edited_file_is_linted_again(tree, tmp_path):
    cache = tmp_path / "cache"
    run(tree, cache)
    clean = tree / "vllm" / "connectors" / "clean.py"
    clean.write_text(ISINSTANCE)
    edited = run(tree, cache)
    assert [f.code for f in edited.findings if f.path.endswith("clean.py")] == ["KV101"]
    assert edited.cache_hits == len(edited.files) - 1
    assert outcome(edited) == outcome(run(tree, None))


def test_same_size_same_mtime_edit_is_still_seen(tree, tmp_path):
    """A file rewritten within one timestamp tick keeps size and mtime: the cache must not trust it."""
    cache = tmp_path / "cache"
    model = tree / "vllm" / "connectors" / "clean.py"
    model.write_text(CLEAN)  # mtime now: inside the racy window when the scan records it
    run(tree, cache)
    before = model.stat()
    model.write_text(CLEAN.replace("a + b", "b + a"))
    os.utime(model, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert model.stat().st_size == before.st_size
    again = run(tree, cache)
    assert outcome(again) == outcome(run(tree, None))


def test_configuration_is_part_of_the_key(tree, tmp_path):
    cache = tmp_path / "cache"
    everything = run(tree, cache)
    only_kv101 = run(tree, cache, select=["KV101"])
    assert only_kv101.cache_hits == 0
    assert {f.code for f in only_kv101.findings} <= {"KV101"}
    assert outcome(only_kv101) == outcome(run(tree, None, select=["KV101"]))

    per_file = Config(per_file_ignores={"*/buggy_0.py": ["KV1"]})
    ignored = run(tree, cache, config=per_file)
    assert not any(f.path.endswith("buggy_0.py") for f in ignored.findings)
    assert outcome(ignored) == outcome(run(tree, None, config=per_file))
    assert outcome(run(tree, cache)) == outcome(everything)

    moved = Config(scheduler_only_paths=["vllm/connectors/*"])
    assert outcome(run(tree, cache, config=moved)) == outcome(run(tree, None, config=moved))


def test_project_index_change_invalidates_results(tree, tmp_path):
    cache = tmp_path / "cache"
    with_resolver = run(tree, cache)
    (tree / "vllm" / "v1" / "core" / "kv_cache_utils.py").write_text("def unrelated():\n    return 1\n")
    without = run(tree, cache)
    assert not without.project.has_resolver
    assert without.cache_hits == 0
    assert outcome(without) == outcome(run(tree, None))
    assert outcome(without) != outcome(with_resolver)


def counted_builds(monkeypatch) -> list:
    """The roots of the tree indexes built from now on: `_build_index` is the one place the scan builds one."""
    built: list = []
    real_build = index_cache._build_index
    monkeypatch.setattr(
        index_cache, "_build_index", lambda root, *more, **named: built.append(root) or real_build(root, *more, **named)
    )
    return built


def test_project_index_is_reused_unless_a_file_that_matters_changed(tree, tmp_path, monkeypatch):
    cache = tmp_path / "cache"
    built = counted_builds(monkeypatch)

    run(tree, cache)
    assert len(built) == 1
    run(tree, cache)
    assert len(built) == 1, "unchanged tree: index reused"

    # Outside the model and layer folders (the census reads those whatever their text).
    model = tree / "vllm" / "plain.py"
    model.write_text(CLEAN + "\n\ndef mul(a, b):\n    return a * b\n")
    (tree / "vllm" / "new.py").write_text(CLEAN)
    run(tree, cache)
    assert len(built) == 1, "a file that mentions nothing the index reads: index reused"

    model.write_text("def size(spec, dcp):\n    return spec.block_size * dcp\n")
    edited = run(tree, cache)
    assert len(built) == 2, "a file that could hold a sizing path: index rebuilt"
    assert outcome(edited) == outcome(run(tree, None))  # builds once more, uncached

    model.unlink()
    run(tree, cache)
    assert len(built) == 4, "a file that mattered vanished: index rebuilt"


def test_a_model_module_matters_only_through_what_the_census_reads_of_it(tree, tmp_path, monkeypatch):
    cache = tmp_path / "cache"
    built = counted_builds(monkeypatch)
    model = tree / "vllm" / "models" / "model.py"
    run(tree, cache)
    model.write_text(model.read_text() + "\n# a comment\n")
    run(tree, cache)
    assert len(built) == 1, "a comment in a model module: the census reads nothing new, the index is reused"
    model.write_text(model.read_text() + "\nclass Layer(AttentionLayerBase):\n    pass\n")
    run(tree, cache)
    assert len(built) == 2, "a new class in a model module may be a layer the census counts: index rebuilt"


def test_a_class_a_model_module_names_without_calling_it_is_read_by_the_census(tree, tmp_path, monkeypatch):
    """The census reads a class a module names in any way — `attn_cls = MLAAttention`, a call `Layer ()` with a
    space — so changing one rebuilds the index (a kept one would keep the old layers)."""
    cache = tmp_path / "cache"
    built = counted_builds(monkeypatch)
    model = tree / "vllm" / "models" / "model.py"
    model.write_text(model.read_text() + "\nlayer_class = FullAttentionSpec\nbuilt = make ()\n")
    run(tree, cache)
    model.write_text(model.read_text().replace("layer_class = FullAttentionSpec", "layer_class = MambaSpec"))
    run(tree, cache)
    assert len(built) == 2, "a class named by reference changed: index rebuilt"
    model.write_text(model.read_text().replace("built = make ()", "built = other ()"))
    run(tree, cache)
    assert len(built) == 3, "a function called with a space before its parenthesis changed: index rebuilt"


def test_a_line_added_above_what_the_census_reads_of_a_model_module_rebuilds_the_index(tree, tmp_path, monkeypatch):
    """The census names the lines of what it reads (a layer's class, the call that builds it: a KV101 witness says
    `deepseek_v2.py:731`): a line added above them moves them, and an index kept from before would name the old
    lines (found on vLLM 0.34.0: a warm check said :731 where a fresh one said :732)."""
    cache = tmp_path / "cache"
    built = counted_builds(monkeypatch)
    model = tree / "vllm" / "models" / "model.py"
    model.write_text(model.read_text() + "\nclass Layer(AttentionLayerBase):\n    pass\n")
    run(tree, cache)
    model.write_text(model.read_text() + "\n# a comment below everything\n")
    run(tree, cache)
    assert len(built) == 1, "below every line the census reads: the index is reused"
    model.write_text("# a comment above everything\n" + model.read_text())
    run(tree, cache)
    assert len(built) == 2, "every line the census reads moved: index rebuilt"


@pytest.mark.parametrize(
    "garbage",
    [
        b"",
        b"not a cache file",
        pickle.dumps({"format": 1, "entries": {"x": 1}}),
        json.dumps({"format": 4, "entries": {}, "codes": []}).encode(),
        b"kvlint-cache 1 " + b"0" * 64 + b"\n{}",
    ],
)
def test_corrupt_cache_is_ignored(tree, tmp_path, garbage):
    cache = tmp_path / "cache"
    expected = outcome(run(tree, cache))
    for path in cache.iterdir():
        path.write_bytes(garbage)
    again = run(tree, cache)
    assert outcome(again) == expected
    assert outcome(run(tree, cache)) == expected


def test_truncated_manifest_is_ignored(tree, tmp_path):
    cache = tmp_path / "cache"
    expected = outcome(run(tree, cache))
    for path in cache.glob("manifest-*"):
        path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])
    assert outcome(run(tree, cache)) == expected


def test_unwritable_cache_folder_costs_nothing_but_speed(tree, tmp_path):
    blocked = tmp_path / "a-file"
    blocked.write_text("not a folder")
    result = run(tree, blocked / "results")
    assert outcome(result) == outcome(run(tree, None))


def test_no_temporary_files_are_left(tree, tmp_path):
    cache = tmp_path / "cache"
    run(tree, cache)
    (tree / "vllm" / "connectors" / "clean.py").write_text(BUGGY)
    run(tree, cache)
    assert not [p.name for p in cache.iterdir() if p.name.startswith(".")]


def test_unreadable_and_broken_files_are_reported_every_time(tree, tmp_path):
    cache = tmp_path / "cache"
    broken = tree / "vllm" / "connectors" / "broken.py"
    broken.write_text(
        "def broken(kv_cache_config:\n"
        "    return [isinstance(g, AttentionSpec) for g in kv_cache_config.kv_cache_groups]\n"
    )
    binary = tree / "vllm" / "connectors" / "binary.py"
    binary.write_bytes(b"\x00\x01")
    age(broken)
    age(binary)
    first = run(tree, cache)
    second = run(tree, cache)
    assert [f.code for f in first.findings if f.path.endswith(("broken.py", "binary.py"))] == ["KV000", "KV000"]
    assert outcome(second) == outcome(first)


def test_pool_and_inline_agree_on_a_small_tree(tmp_path, monkeypatch):
    tree = make_tree(tmp_path / "tree", buggy_copies=6)
    monkeypatch.setattr(scan_jobs, "POOL_MIN_BYTES", 0)  # a pool even for a few small files
    pooled = run(tree, tmp_path / "cache", jobs=2)
    assert outcome(pooled) == outcome(run(tree, None, jobs=1))


def test_results_come_in_file_order(tree, monkeypatch):
    from kvlint.scan.files import collect_files

    monkeypatch.setattr(scan_jobs, "POOL_MIN_BYTES", 0)
    result = run(tree, None, jobs=2)
    assert [r.path for r in result.files] == [f.display for f in collect_files([tree / "vllm"], [])[0]]


# ------------------------------------------------------------------------------------ keys and progress


def test_key_is_the_same_in_every_process(tmp_path):
    """Sets in the project index must not make the key depend on the string hash seed."""
    script = textwrap.dedent(
        """
        from kvlint.scan.result_cache import configuration_key
        from kvlint.analysis.hierarchy import SpecHierarchy
        from kvlint.analysis.tree_index import TreeIndex
        from kvlint.scan.index_cache import index_digests
        index = TreeIndex(None, SpecHierarchy({"A": (), "B": ("A",)}), resolver_layer_classes=frozenset({"A", "B", "C", "D", "E"}))
        print(configuration_key(index_digests(index).shared, {"x": ("a", "b")}, ("KV101",)))
        """
    )
    keys = {
        subprocess.run(
            [sys.executable, "-c", script],
            env={**os.environ, "PYTHONHASHSEED": str(seed)},
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        for seed in (1, 2, 3)
    }
    assert len(keys) == 1


def test_key_changes_with_each_input():
    def key(index, settings, codes):
        return configuration_key(index_digests(index).shared, settings, codes)

    index = TreeIndex(None, SpecHierarchy({"A": ()}))
    base = key(index, {}, ("KV101",))
    assert key(index, {}, ("KV102",)) != base
    assert key(index, {"scheduler-only-paths": ("x",)}, ("KV101",)) != base
    assert (
        key(TreeIndex(None, SpecHierarchy({"A": ()}), sizing=SizingAnalysis((), (), (), None, None)), {}, ("KV101",))
        != base
    )
    assert key(TreeIndex("/elsewhere", SpecHierarchy({"A": ()})), {}, ("KV101",)) != base


def test_fresh_entry_requires_same_stat_rules_and_module(tmp_path):
    cache = ResultCache(tmp_path, "k")
    old = FileStat(10, 1, 1, 1)
    from kvlint.types import FileResult

    a, b = ("vllm/a.py", "d1"), ("vllm/b.py", "d1")
    cache.store("a.py", old, "digest", a, ("KV101",), FileResult("a.py"))
    assert cache.fresh("a.py", old, a, ("KV101",)) == FileResult("a.py")
    assert cache.fresh("a.py", FileStat(10, 2, 1, 1), a, ("KV101",)) is None
    assert cache.fresh("a.py", old, b, ("KV101",)) is None
    assert cache.fresh("a.py", old, ("vllm/a.py", "d2"), ("KV101",)) is None
    assert cache.fresh("a.py", old, a, ("KV101", "KV102")) is None
    assert cache.matching("a.py", "other", None, a, ("KV101",)) is None
    assert cache.matching("a.py", "digest", None, a, ("KV101",)) == FileResult("a.py")


def test_progress_only_when_asked(tree, monkeypatch, capsys):
    monkeypatch.setattr(progress_line, "PROGRESS_DELAY_S", 0.0)
    monkeypatch.setattr(progress_line, "PROGRESS_INTERVAL_S", 0.0)
    run(tree, None, progress=False)
    assert capsys.readouterr().err == ""
    run(tree, None, progress=True)
    err = capsys.readouterr().err
    assert "\rkvlint: checked" in err and err.endswith("\r\x1b[K")


def test_progress_waits_for_slow_scans(tree, capsys):
    run(tree, None, progress=True)  # a fraction of a second: nothing drawn
    assert capsys.readouterr().err == ""


def test_warm_scan_with_an_unrelated_edit_never_loads_the_parser(tree, tmp_path):
    """Only the cache's remembered TRIGGERS are needed to settle a changed file no rule could report in; the
    tree's index, which the cache vouches for, is not read, so the analysis is not even imported."""
    cache = tmp_path / "cache"
    model = tree / "vllm" / "plain.py"  # outside the model and layer folders, which the census reads
    model.write_text(CLEAN)
    run(tree, cache)  # cold: imports the rules, remembers their triggers
    model.write_text(CLEAN + "\n# a comment\n")
    script = textwrap.dedent(
        f"""
        import sys
        from pathlib import Path
        from kvlint.scan.config import Config
        from kvlint.scan.runner import scan
        result = scan([Path({str(tree / "vllm")!r})], Config(), None, [], jobs=1, cache_dir=Path({str(cache)!r}))
        loaded = [name in sys.modules for name in ("libcst", "kvlint.engine.lint", "kvlint.analysis.tree_index")]
        print(result.cache_hits, len(result.files), len(result.findings), *loaded)
        """
    )
    completed = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    hits, files, findings, parser, engine, analysis = completed.stdout.split()
    assert int(hits) == int(files) - 1 and int(findings) == len(run(tree, None).findings)
    assert (parser, engine, analysis) == ("False", "False", "False")

    model.write_text(ISINSTANCE)  # now a rule could report in it: the rules are loaded and it is linted
    completed = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    assert completed.stdout.split()[3:] == ["True", "True", "True"]
    assert outcome(run(tree, cache)) == outcome(run(tree, None))


def test_editing_a_sizing_module_relints_only_that_module(tree, tmp_path):
    """The cross-file analysis changes with the edit (buggy_0.py holds a sizing path), but other modules'
    results depend only on their own slice of it: they stay cached, and the scan still reports what an
    uncached one does."""
    scanned = [tree / "vllm" / "connectors"]  # the index still covers the whole tree
    cache = tmp_path / "cache"
    first = scan(scanned, Config(), None, [], jobs=1, cache_dir=cache)
    edited = tree / "vllm" / "connectors" / "buggy_0.py"
    edited.write_text("# one line more above everything\n" + edited.read_text())
    second = scan(scanned, Config(), None, [], jobs=1, cache_dir=cache)

    assert stable_repr(second.project) != stable_repr(first.project), "the edit changes the cross-file analysis"
    assert second.cache_hits == len(second.files) - 1, "only the edited module is linted again"
    assert outcome(second) == outcome(scan(scanned, Config(), None, [], jobs=1, cache_dir=None))
    before = [(f.code, f.line + 1) for f in first.findings if f.path.endswith("buggy_0.py")]
    assert before and [(f.code, f.line) for f in second.findings if f.path.endswith("buggy_0.py")] == before


def test_damaged_remembered_triggers_are_not_trusted(tree, tmp_path):
    cache = tmp_path / "cache"
    expected = outcome(run(tree, cache))
    [manifest] = cache.glob("manifest-*")
    key = manifest.stem.removeprefix("manifest-")
    stored = load_record(manifest, "manifest", key)
    stored["triggers"] = {code: "block_size" for code in stored["triggers"]}  # flat strings: not clauses
    assert save_record(manifest, "manifest", key, stored)  # signed: as if kvlint had written it
    (tree / "vllm" / "models" / "model.py").write_text(ISINSTANCE)
    assert outcome(run(tree, cache)) == outcome(run(tree, None))
    assert outcome(run(tree, cache)) != expected
