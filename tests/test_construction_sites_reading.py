"""What kvlint.analysis.construction_sites reads as a mention of a candidate class, what it never parses, and what a
later build of the same tree takes from the earlier one (its `ModuleSites`)."""

from __future__ import annotations

import ast
from dataclasses import replace

import pytest

from kvlint.analysis.construction_sites import _Sites, read_construction_sites, scheduler_built_classes
from kvlint.analysis.vocabulary import DEFAULT_SCHEDULER_ONLY_PATHS as PATHS

# The candidate: a class of a module that reads KV cache groups and tests a spec's type.
MANAGER = b"""
class Manager:
    def __init__(self, kv_cache_config):
        self.groups = [g for g in kv_cache_config.kv_cache_groups if isinstance(g.kv_cache_spec, AttentionSpec)]
"""
HOME = "vllm/v1/worker/manager.py"
SCHEDULER = "vllm/v1/core/sched/scheduler.py"
WORKER = "vllm/v1/worker/runner.py"
BUILT = b"def build(kv_cache_config):\n    return Manager(kv_cache_config)\n"
SPECS = frozenset({"AttentionSpec"})


def built(**others: bytes) -> frozenset[str]:
    texts = {HOME: MANAGER, SCHEDULER: BUILT, **{path.replace("__", "/"): text for path, text in others.items()}}
    return scheduler_built_classes(texts, PATHS, SPECS)


def test_a_class_only_the_scheduler_builds_is_claimed():
    assert built() == {"Manager"}
    assert scheduler_built_classes({HOME: MANAGER}, PATHS, SPECS) == frozenset()  # built nowhere: not claimed


@pytest.mark.parametrize(
    "mention",
    [
        "def build(c):\n    return Manager(c)\n",  # built by the worker
        "def build(c):\n    return make(Manager, c)\n",  # handed on: may be built anywhere
        "def build(c):\n    return isinstance(c, Manager)\n",
        "class Sub(Manager):\n    pass\n",
        "def build(c, *, k=None):\n    manager: Manager = Manager(c)\n    return manager\n",
        "import m\nx = m.Manager\n",
        # `Manager.Inner(…)` builds Inner and mentions Manager, whether or not Inner is a candidate too.
        "def build(c):\n    return Manager.Inner(c)\n",
        "def build(c):\n    return Manager.Manager(c)\n",
    ],
)
def test_any_other_mention_in_worker_code_rules_the_class_out(mention):
    assert built(vllm__v1__worker__runner_py=mention.encode()) == frozenset()


@pytest.mark.parametrize(
    ("mention", "parsed"),
    [
        # What only the parser tells from a mention: the module is read.
        ("from vllm.v1.worker.manager import Manager\n", True),
        ("def build(c: Manager) -> Manager:\n    manager: Manager = c\n    return manager\n", True),
        ("def build(c):\n    '''Manager is built elsewhere.'''\n    return c\n", True),
        # What the text tells: the module is not even parsed.
        ("# Manager(kv_cache_config) is built by the scheduler only\n", False),
        ("  # see {the manager}: Manager(kv_cache_config)\n", True),  # a `{`: it may be an f-string's line
        ("def bind(self, manager: \"Manager\") -> None:\n    log('Manager')\n", False),
        ("class Manager:\n    pass\n", False),  # a class of the same name defined here is no mention
    ],
)
def test_what_is_no_mention_leaves_the_class_claimed(mention, parsed):
    texts = {HOME: MANAGER, SCHEDULER: BUILT, WORKER: mention.encode()}
    claimed, sites = read_construction_sites(texts, PATHS, SPECS)
    assert claimed == {"Manager"}
    assert (WORKER in [s.module for s in sites]) is parsed


def test_an_f_strings_line_that_starts_like_a_comment_may_hold_code():
    assert built(vllm__v1__worker__runner_py=b'def report(c):\n    return f"""\n# {Manager(c)}\n"""\n') == frozenset()


@pytest.mark.parametrize(
    "half",
    [
        b"class FooConnector:\n    class FooConnectorScheduler:\n        def make(self, c):\n            return Manager(c)\n",
        b"class \\\n  FooConnectorScheduler:\n    def make(self, c):\n        return Manager(c)\n",
        b"\fclass FooConnectorScheduler:\n    def make(self, c):\n        return Manager(c)\n",
        "class Ä_Scheduler:\n    def make(self, c):\n        return Manager(c)\n".encode(),
    ],
)
def test_a_connector_half_named_scheduler_builds_with_the_schedulers_config(half):
    ast.parse(half)
    assert scheduler_built_classes({HOME: MANAGER, WORKER: half}, PATHS, SPECS) == {"Manager"}
    half = b"class FooConnector:\n    class FooConnectorScheduler:\n        def make(self, c):\n            return Manager(c)\n"
    # The same call in the connector's other half is the worker's.
    other = half.replace(b"FooConnectorScheduler", b"FooConnectorWorker")
    assert scheduler_built_classes({HOME: MANAGER, WORKER: other}, PATHS, SPECS) == frozenset()


def test_a_module_that_does_not_parse_may_build_any_class_its_code_names():
    assert built(vllm__v1__worker__runner_py=b"def build(c:\n    return Manager(c)\n") == frozenset()
    assert built(vllm__v1__worker__runner_py=b"def build(c:\n    return Manager\n") == frozenset()
    # A comment line or a quoted word is no code, parsed or not.
    assert built(vllm__v1__worker__runner_py=b"def build(c:\n    # Manager(c)\n    'Manager'\n") == {"Manager"}


def test_a_class_no_scheduler_code_calls_is_not_looked_for():
    # Called only by the worker: no module is parsed for it, and nothing is claimed.
    texts = {HOME: MANAGER, WORKER: BUILT, SCHEDULER: b"def step(manager):\n    return manager\n"}
    claimed, sites = read_construction_sites(texts, PATHS, SPECS)
    assert claimed == frozenset() and sites == ()
    # A call spread over lines, behind a comment, or through an attribute still makes it a candidate.
    for call in (b"(Manager  # the manager\n(c))", b"Manager \\\n(c)", b"(Manager)(c)", b"m.Manager(c)"):
        texts[SCHEDULER] = b"def build(c):\n    return " + call + b"\n"
        claimed, sites = read_construction_sites({**texts, WORKER: b""}, PATHS, SPECS)
        assert claimed == {"Manager"}, call
        assert [s.module for s in sites] == [SCHEDULER]


def reference(texts: dict[str, bytes], candidates: set[str]) -> frozenset[str]:
    """Every module parsed for every candidate: what the pre-filters, the order and the skipping must not change."""
    built: set[str] = set()
    elsewhere: set[str] = set()
    for relative, data in texts.items():
        _Sites(relative, PATHS, set(candidates), built, elsewhere).visit(ast.parse(data))
    return frozenset(built - elsewhere)


INNER = MANAGER.replace(b"class Manager", b"class Inner")
MENTIONS = [
    b"x = Inner(c)\n",
    b"def build(c):\n    return Manager.Inner(c)\n",
    b"def build(c):\n    return Inner.Manager(c)\n",
    b"def build(c: Manager):\n    return c  # Inner(c)\n",
    b"class AScheduler:\n    def make(self, c):\n        return Inner(c), Manager\n",
    b"class BScheduler:\n    def make(self, c):\n        return Manager(c)\n",
    b"",
]


@pytest.mark.parametrize("first", range(len(MENTIONS)))
@pytest.mark.parametrize("second", range(len(MENTIONS)))
def test_the_answer_is_every_modules_read_for_every_class(first, second):
    texts = {
        HOME: MANAGER + INNER,
        SCHEDULER: b"def build(c):\n    return Manager(c), Inner(c)\n",
        WORKER: MENTIONS[first],
        "vllm/v1/worker/other_runner.py": MENTIONS[second] + b"# padding\n" * second,
    }
    assert scheduler_built_classes(texts, PATHS, SPECS) == reference(texts, {"Manager", "Inner"})


def test_the_smallest_module_that_rules_a_class_out_is_the_one_read():
    small, large = b"x = Manager(c)\n", b"def build(c):\n    return Manager(c)\n" + b"y = 1\n" * 50
    texts = {HOME: MANAGER, SCHEDULER: BUILT, "vllm/v1/worker/a.py": large, "vllm/v1/worker/b.py": small}
    claimed, sites = read_construction_sites(texts, PATHS, SPECS)
    assert claimed == frozenset()
    assert [s.module for s in sites] == ["vllm/v1/worker/b.py"]


def test_a_later_build_reads_again_only_what_changed():
    texts = {HOME: MANAGER, SCHEDULER: BUILT, WORKER: b"def build(c: Manager):\n    return c\n"}
    claimed, sites = read_construction_sites(texts, PATHS, SPECS)
    assert claimed == {"Manager"}
    assert {s.module: s.asked for s in sites} == {WORKER: ("Manager",), SCHEDULER: ("Manager",)}
    # The same texts: what the earlier build said of each module is taken, not read again (a planted answer shows it).
    planted = tuple(replace(s, built=(), elsewhere=("Manager",)) if s.module == WORKER else s for s in sites)
    # (The worker's module is read first; the scheduler's then names no class left to claim: it is not read.)
    assert read_construction_sites(texts, PATHS, SPECS, planted) == (frozenset(), planted[:1])
    assert planted[0].module == WORKER
    # The module edited is read again: its new mention rules the class out, whatever the earlier build said.
    edited = {**texts, WORKER: b"def build(c):\n    return Manager(c)\n"}
    claimed, again = read_construction_sites(edited, PATHS, SPECS, sites)
    assert claimed == frozenset()
    assert next(s for s in again if s.module == WORKER).elsewhere == ("Manager",)
    assert again == read_construction_sites(edited, PATHS, SPECS)[1]
    # Under other scheduler-only paths (or another Python), nothing kept is taken.
    elsewhere_paths = (*PATHS, "vllm/v1/worker/*")
    assert read_construction_sites(texts, elsewhere_paths, SPECS, planted)[0] == {"Manager"}
    # Asked about other classes, a module is read again too.
    wider = {**texts, HOME: MANAGER + MANAGER.replace(b"Manager", b"Keeper"), SCHEDULER: BUILT + b"Keeper(c)\n"}
    wider[WORKER] = texts[WORKER] + b"def keep(k: Keeper):\n    return k\n"
    claimed, widened = read_construction_sites(wider, PATHS, SPECS, planted)
    assert claimed == {"Manager", "Keeper"}
    assert next(s for s in widened if s.module == WORKER).asked == ("Keeper", "Manager")


def test_a_call_through_a_class_mentions_the_class():
    # Both are candidates the scheduler builds; the worker builds Inner through Manager: both are ruled out.
    inner = MANAGER.replace(b"class Manager", b"class Inner")
    texts = {HOME: MANAGER + inner, SCHEDULER: b"def build(c):\n    return Manager(c), Inner(c)\n"}
    assert scheduler_built_classes(texts, PATHS, SPECS) == {"Manager", "Inner"}
    texts[WORKER] = b"def build(c):\n    return Manager.Inner(c)\n"
    assert scheduler_built_classes(texts, PATHS, SPECS) == frozenset()


@pytest.mark.parametrize(
    ("home", "claimed"),
    [
        (MANAGER, {"Manager"}),
        (MANAGER.replace(b"AttentionSpec", b"Widget"), set()),  # its type test names no spec class
        (MANAGER.replace(b"isinstance(g.kv_cache_spec, AttentionSpec)", b"g.kv_cache_spec is AttentionSpec"), set()),
        (MANAGER.replace(b"kv_cache_groups", b"layers"), set()),  # its module reads no group
    ],
)
def test_a_candidate_is_a_class_that_could_test_a_groups_spec(home, claimed):
    assert scheduler_built_classes({HOME: home, SCHEDULER: BUILT}, PATHS, SPECS) == claimed
    # Without the tree's spec classes, a type test of any class makes a candidate.
    widget = MANAGER.replace(b"AttentionSpec", b"Widget")
    assert scheduler_built_classes({HOME: widget, SCHEDULER: BUILT}, PATHS, None) == {"Manager"}
