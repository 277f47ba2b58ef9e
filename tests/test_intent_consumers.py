"""Who consumes the worker side's answer of a group-spec check in code both roles run (kvlint.analysis.
consumers): one miniature connector per behaviour, each named after what it proves. Written against the
mutants scripts/mutation.py made of that module (issue 31)."""

from __future__ import annotations

import libcst as cst

from kvlint.analysis.cst_walk import parent_map
from kvlint.analysis.flow.consumers import scheduler_consumed_members, unconsumed_divergence
from kvlint.analysis.flow.provenance import SpecFlow
from tests.test_witness_semantics import _isinstance_call

STORED = """
class FooConnector:
    def __init__(self, vllm_config, role):
        self._pulls = any(isinstance(g.kv_cache_spec, MambaSpec) for g in vllm_config.groups)

    def pulls(self):
        return self._pulls
"""


def divergence(source: str, consumed=frozenset({"pulls"})) -> str | None:
    module = cst.parse_module(source)
    flow = SpecFlow(module, lambda: parent_map(module))
    return unconsumed_divergence(_isinstance_call(module), flow, consumed)


# ------------------------------------------------------------------------------------ a stored value


def test_a_stored_answer_read_only_through_a_scheduler_read_member_is_not_consumed():
    assert divergence(STORED) == "`self._pulls` is read only through `pulls`, which only the scheduler reads"


def test_a_stored_answer_is_consumed_when_any_of_its_readers_is_not_scheduler_only():
    also = STORED + "\n    def other(self):\n        return not self._pulls\n"
    assert divergence(also) is None
    assert divergence(also, frozenset({"pulls", "other"})) is not None


def test_a_stored_answer_nobody_reads_is_not_called_scheduler_only():
    assert divergence(STORED.replace("self._pulls\n", "None\n")) is None


def test_a_read_outside_any_method_counts_as_a_consumer():
    assert divergence(STORED + "\n\nFLAG = lambda self: self._pulls\n") is None


def test_storing_it_again_elsewhere_is_no_read():
    again = STORED + "\n    def reset(self):\n        self._pulls = False\n"
    assert divergence(again) is not None


def test_in_one_half_of_a_split_connector_only_one_role_runs_the_check():
    for half in ("FooConnectorScheduler", "FooConnectorWorker"):
        assert divergence(STORED.replace("FooConnector", half)) is None


def test_a_class_nested_in_a_half_is_judged_by_its_own_name():
    nested = "class FooConnectorWorker:\n" + "".join(f"    {line}\n" for line in STORED.strip().splitlines())
    assert divergence(nested) is not None


def test_only_a_constructor_taking_the_role_runs_for_both_roles():
    assert divergence(STORED.replace("vllm_config, role", "vllm_config")) is None
    assert divergence(STORED.replace("def __init__", "def setup")) is None


def test_only_a_single_self_attribute_target_is_a_stored_value():
    assert divergence(STORED.replace("self._pulls = any", "pulls = any")) is None
    assert divergence(STORED.replace("self._pulls = any", "self._pulls = self._copy = any")) is None
    assert divergence(STORED.replace("self._pulls = any", "other._pulls = any")) is None


def test_a_check_outside_any_function_has_no_role():
    assert divergence("FLAG = isinstance(spec, MambaSpec)\n") is None


# ---------------------------------------------------------------------------------------- a validation

VALIDATION = """
class FooConnector:
    def __init__(self, vllm_config, role):
        self._validate(vllm_config)

    def _validate(self, vllm_config):
        for spec in vllm_config.specs:
            if isinstance(spec, MambaSpec) and spec.big:
                raise ValueError("unsupported")
"""

COLLECTING = """
class FooConnector:
    def __init__(self, vllm_config, role):
        self._validate(vllm_config)

    def _validate(self, vllm_config):
        unsupported = []
        for spec in vllm_config.specs:
            if isinstance(spec, MambaSpec):
                unsupported.append(spec)
        if unsupported:
            raise ValueError(unsupported)
"""


def test_a_validation_both_roles_run_is_decided_by_the_scheduler_half():
    expected = "`_validate` validates for both roles: the scheduler half raises on the flattened config"
    assert divergence(VALIDATION) == expected
    assert divergence(COLLECTING) == expected


def test_a_validation_never_called_is_not_called_for_both_roles():
    assert divergence(VALIDATION.replace("self._validate(vllm_config)", "pass")) is None


def test_a_validation_called_in_a_branch_on_the_role_is_not_called_for_both():
    branched = VALIDATION.replace(
        "        self._validate(vllm_config)",
        "        if role == KVConnectorRole.WORKER:\n            if vllm_config:\n                self._validate(vllm_config)",
    )
    assert divergence(branched) is None
    other_branch = VALIDATION.replace(
        "        self._validate(vllm_config)", "        if vllm_config:\n            self._validate(vllm_config)"
    )
    assert divergence(other_branch) is not None


def test_a_validation_also_called_from_one_role_only_code_is_not_called_for_both():
    assert divergence(VALIDATION + "\n    def later(self):\n        self._validate(None)\n") is None
    assert divergence(VALIDATION + "\n\nFooConnector._validate(None, None)\n") is None


def test_a_branch_that_does_more_than_report_is_no_validation():
    for body in ("log(spec)", "raise ValueError()\n                log(spec)", "unsupported.append(spec); log(spec)"):
        changed = VALIDATION.replace('raise ValueError("unsupported")', body)
        assert divergence(changed) is None, body
    nested = VALIDATION.replace('raise ValueError("unsupported")', "if x:\n                    raise ValueError()")
    assert divergence(nested) is None
    with_else = VALIDATION.replace(
        'raise ValueError("unsupported")', 'raise ValueError("unsupported")\n            else:\n                pass'
    )
    assert divergence(with_else) is None


def test_a_collected_problem_is_a_validation_only_when_the_function_raises_on_the_list():
    assert divergence(COLLECTING.replace("if unsupported:", "if other:")) is None
    assert divergence(COLLECTING.replace("raise ValueError(unsupported)", "log(unsupported)")) is None


def test_the_check_must_be_the_test_itself_or_inside_its_and():
    wrapped = VALIDATION.replace("isinstance(spec, MambaSpec) and spec.big", "f(isinstance(spec, MambaSpec))")
    assert divergence(wrapped) is None
    named = "x = isinstance(spec, MambaSpec) and spec.big\n            if x:"
    assert divergence(VALIDATION.replace("if isinstance(spec, MambaSpec) and spec.big:", named)) is None


# -------------------------------------------------------------------------- who reads each accessor

CONNECTOR = "vllm/distributed/kv_transfer/kv_connector/v1/foo.py"
ACCESSORS = """
class FooConnector:
    def pulls(self):
        return self._pulls

    def constant(self):
        return 3

    def branching(self):
        if x:
            return self._x
        return self._y
"""


def consumed(reads: str, path: str = "vllm/v1/core/sched/scheduler.py", patterns=()) -> frozenset[str]:
    return scheduler_consumed_members({CONNECTOR: ACCESSORS.encode(), path: reads.encode()}, patterns)


def test_an_accessor_read_only_in_scheduler_code_is_scheduler_consumed():
    reads = "class FooConnectorScheduler:\n    def go(self):\n        return self.c.pulls()\n"
    assert consumed(reads) == frozenset({"pulls"})
    assert consumed(reads.replace("Scheduler:", "Worker:")) == frozenset()
    assert consumed(reads.replace("Scheduler:", ":"), patterns=("vllm/v1/core/*",)) == frozenset({"pulls"})


def test_a_read_at_the_margin_or_in_a_function_is_a_worker_read():
    assert consumed("x = c.pulls()\n") == frozenset()
    assert consumed("def go(c):\n    return c.pulls()\n") == frozenset()


def test_a_read_in_a_class_nested_in_a_scheduler_class_is_the_scheduler_s():
    reads = "class FooConnectorScheduler:\n    class Inner:\n        def go(self):\n            return self.c.pulls()\n"
    assert consumed(reads) == frozenset({"pulls"})
    after = (
        "class FooConnectorScheduler:\n    pass\n\n\nclass Other:\n    def go(self):\n        return self.c.pulls()\n"
    )
    assert consumed(after) == frozenset()


def test_a_member_of_the_same_name_delegating_is_the_same_consumer():
    delegate = "class Wrapper:\n    def pulls(self):\n        return self.inner.pulls()\n"
    assert consumed(delegate) == frozenset({"pulls"})


def test_a_method_with_one_return_reading_the_instance_in_a_connector_module_is_an_accessor():
    # 0.33.0's moriio: `return self.mode == MoRIIOMode.READ and self._transfers_mamba_state`, read only by the
    # scheduler (through multi_connector's delegating member of the same name).
    texts = {CONNECTOR: ACCESSORS.encode()}
    assert scheduler_consumed_members(texts, ()) == frozenset({"pulls"})
    computed = {CONNECTOR: ACCESSORS.replace("return 3", "return self.mode == 1 and self._b").encode()}
    assert scheduler_consumed_members(computed, ()) == frozenset({"pulls", "constant"})
    elsewhere = {"vllm/v1/worker/foo.py": ACCESSORS.encode()}
    assert scheduler_consumed_members(elsewhere, ()) == frozenset()


def test_a_validation_reports_when_any_statement_of_its_list_check_raises():
    logged = COLLECTING.replace(
        "raise ValueError(unsupported)", "log(unsupported)\n            raise ValueError(unsupported)"
    )
    assert divergence(logged) is not None


def test_a_validation_at_module_level_has_no_role():
    assert divergence("if isinstance(spec, MambaSpec):\n    raise ValueError()\n") is None


def test_a_both_roles_constructor_outside_any_class_is_no_half():
    source = "def __init__(self, vllm_config, role):\n    self._pulls = isinstance(s, MambaSpec)\n\ndef pulls(self):\n    return self._pulls\n"
    assert divergence(source) is not None


def test_a_read_one_space_into_a_scheduler_class_is_the_schedulers():
    assert consumed("class FooConnectorScheduler:\n x = self.c.pulls()\n") == frozenset({"pulls"})


def test_a_class_at_the_reads_own_indentation_does_not_enclose_it():
    reads = "class FooWorker:\n    class Scheduler:\n        pass\n    x = self.c.pulls()\n"
    assert consumed(reads) == frozenset()


def test_a_delegating_member_is_told_from_the_def_before_it():
    delegate = "class Wrapper:\n    def other(self):\n        pass\n\n    def pulls(self):\n        return self.inner.pulls()\n"
    assert consumed(delegate) == frozenset({"pulls"})
    assert (
        consumed(
            delegate.replace("return self.inner.pulls()", "pass\n\n    def x(self):\n        return self.inner.pulls()")
        )
        == frozenset()
    )
