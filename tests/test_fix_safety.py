"""KV101's fix is safe for every plain spec (issue 27): a node's own parentheses kept, names the scope rebinds,
uses reached through an alias, call sites of another same-named function, re-exports, loop names, comments,
tabs and the output's format. Each test holds a shape a safe fix once broke."""

from __future__ import annotations

import ast
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from kvlint.engine.lint import LintRequest, lint_text
from kvlint.engine.registry import rule_by_code
from kvlint.fixing.apply import apply_fixes

sys.path.insert(0, str(Path(__file__).parent))
from test_rules import project_for  # noqa: E402  (the examples' tree: vLLM 0.29.0's containers)

PATH = "vllm/distributed/kv_transfer/kv_connector/v1/generated/worker.py"
RULE = rule_by_code("KV101")
PROJECT = project_for(RULE.INVALID[0])
IMPORTS = "from vllm.v1.kv_cache_interface import CrossAttentionSpec, FullAttentionSpec, MambaSpec\n\n"


def fixed(source: str, unsafe: bool = False, path: str = PATH):
    """(KV101's findings, the source after `kvlint fix`)."""
    source = textwrap.dedent(source).lstrip("\n")
    findings = [f for f in lint_text(LintRequest(path, path, PROJECT, (RULE,)), source).findings if f.code == "KV101"]
    assert findings, source
    return findings, apply_fixes(source, findings, unsafe=unsafe).text


def class_arguments(source: str) -> list[str]:
    """The class argument of every `isinstance` and the comparator of every `type(…) …` test, as ast reads them."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "isinstance":
            found.append(ast.dump(node.args[1]))
        elif (
            isinstance(node, ast.Compare)
            and isinstance(node.left, ast.Call)
            and getattr(node.left.func, "id", "") == "type"
        ):
            found.append(ast.dump(node.comparators[0]))
    return found


# ------------------------------------------------------------------------------- item 1: parentheses


@pytest.mark.parametrize(
    "classes",
    ["(MambaSpec, CrossAttentionSpec)", "((MambaSpec, CrossAttentionSpec))", "(MambaSpec, *EXTRA)"],
)
def test_a_tuple_of_classes_keeps_its_parentheses(classes):
    source = (
        IMPORTS
        + "EXTRA = (CrossAttentionSpec,)\n\n"
        + "def worker(kv_cache_config):\n"
        + f"    return [g for g in kv_cache_config.kv_cache_groups if isinstance(g.kv_cache_spec, {classes})]\n"
    )
    findings, text = fixed(source)
    assert findings[0].fix.applicability.value == "safe"
    assert "for spec in iter_layer_specs(g.kv_cache_spec)" in text
    assert class_arguments(text) == class_arguments(source)  # the tuple, not two more arguments
    compile(text, PATH, "exec")


def test_the_unsafe_type_not_in_rewrite_parses_and_keeps_the_tuple():
    source = IMPORTS + (
        "def worker(kv_cache_config):\n"
        "    return [g for g in kv_cache_config.kv_cache_groups if type(g.kv_cache_spec) not in (MambaSpec, FullAttentionSpec)]\n"
    )
    findings, text = fixed(source, unsafe=True)
    assert findings[0].fix is not None
    assert "any(\n        type(spec) not in (MambaSpec, FullAttentionSpec)" in text
    assert class_arguments(text) == class_arguments(source)


# ---------------------------------------------------------------------------------- item 5: shadowing

SHADOWED = {
    "parameter all": (
        "def worker(kv_cache_config, all=None):\n"
        "    return [g for g in kv_cache_config.kv_cache_groups if isinstance(g.kv_cache_spec, MambaSpec)]\n",
        "`all` is a parameter here",
    ),
    "local any": (
        "def worker(kv_cache_config):\n"
        "    any = lambda values: True\n"
        "    return [g for g in kv_cache_config.kv_cache_groups if type(g.kv_cache_spec) is not MambaSpec]\n",
        "`any` is bound in `worker`",
    ),
    "module iter_layer_specs": (
        "def iter_layer_specs(spec):\n"
        "    return [spec]\n\n"
        "def worker(kv_cache_config):\n"
        "    return [g for g in kv_cache_config.kv_cache_groups if isinstance(g.kv_cache_spec, MambaSpec)]\n",
        "`iter_layer_specs` is bound at module level",
    ),
    "local iter_layer_specs": (
        "def worker(kv_cache_config, layers):\n"
        "    iter_layer_specs = layers.get\n"
        "    return [g for g in kv_cache_config.kv_cache_groups if isinstance(g.kv_cache_spec, MambaSpec)]\n",
        "`iter_layer_specs` is bound in `worker`",
    ),
    "module is_full_attention_spec": (
        "is_full_attention_spec = None\n\n"
        "def worker(kv_cache_config):\n"
        "    return [g for g in kv_cache_config.kv_cache_groups if isinstance(g.kv_cache_spec, FullAttentionSpec)]\n",
        "`is_full_attention_spec` is bound at module level",
    ),
    "numpy all": (
        "from numpy import all\n\n"
        "def worker(kv_cache_config):\n"
        "    return [g for g in kv_cache_config.kv_cache_groups if isinstance(g.kv_cache_spec, MambaSpec)]\n",
        "`all` is bound at module level",
    ),
}


@pytest.mark.parametrize("case", sorted(SHADOWED))
def test_no_fix_calls_a_name_the_scope_rebinds(case):
    code, said = SHADOWED[case]
    findings, text = fixed(IMPORTS + code, unsafe=True)
    assert all(f.fix is None for f in findings)
    assert said in findings[0].message and "no automatic fix" in findings[0].message
    assert text == IMPORTS + code  # nothing written: no F811/F401 either


def test_an_import_of_the_helper_from_the_interface_is_the_name_meant():
    source = (
        "from vllm.v1.kv_cache_interface import MambaSpec, iter_layer_specs\n\n"
        "def worker(kv_cache_config):\n"
        "    return [g for g in kv_cache_config.kv_cache_groups if isinstance(g.kv_cache_spec, MambaSpec)]\n"
    )
    findings, text = fixed(source)
    assert findings[0].fix.applicability.value == "safe" and "iter_layer_specs(g.kv_cache_spec)" in text


# ------------------------------------------------------------------------- item 6: a use by another name


def test_a_use_reached_through_another_name_of_the_spec_gets_no_fix():
    source = """
    def mamba_types(kv_cache_config):
        for g in kv_cache_config.kv_cache_groups:
            spec = g.kv_cache_spec
            if not isinstance(spec, MambaSpec):
                continue
            yield g.kv_cache_spec.mamba_type
    """
    findings, _ = fixed(source, unsafe=True)
    assert all(f.fix is None for f in findings)
    assert "`g.kv_cache_spec.mamba_type` is used" in findings[0].message


def test_a_use_through_a_name_bound_after_the_check_gets_no_fix():
    source = """
    def mamba_types(kv_cache_config):
        for g in kv_cache_config.kv_cache_groups:
            if not isinstance(g.kv_cache_spec, MambaSpec):
                continue
            chosen = g.kv_cache_spec
            yield chosen.mamba_type
    """
    findings, _ = fixed(source, unsafe=True)
    assert all(f.fix is None for f in findings)


# ------------------------------------------------------------------------------- item 11: re-exports


def test_a_package_init_keeps_the_class_it_re_exports():
    source = """
    from vllm.v1.kv_cache_interface import FullAttentionSpec

    def zero_blocks(kv_cache_config):
        return [g for g in kv_cache_config.kv_cache_groups if isinstance(g.kv_cache_spec, FullAttentionSpec)]
    """
    init = PATH.replace("worker.py", "__init__.py")
    findings, text = fixed(source, path=init)
    assert "is_full_attention_spec(" in text
    assert "import FullAttentionSpec" in text and not any(not c.add for c in findings[0].fix.imports)
    # elsewhere the import no code uses now goes
    assert "FullAttentionSpec," not in fixed(source)[1] and "import FullAttentionSpec\n" not in fixed(source)[1]


# ------------------------------------------------------------------------------ item 12: loop names


def test_a_check_that_mentions_every_loop_name_gets_a_fresh_one():
    source = (
        "def worker(kv_cache_config, spec, layer, layer_spec, layer_spec_):\n"
        "    return [g for g in kv_cache_config.kv_cache_groups if isinstance(g.kv_cache_spec, (spec, layer, layer_spec, layer_spec_, MambaSpec))]\n"
    )
    findings, text = fixed(source)
    assert findings[0].fix is not None
    assert "for layer_spec_1 in iter_layer_specs(g.kv_cache_spec)" in text


# ------------------------------------------------------------------ item 16: callers of another function


def test_a_same_named_method_of_another_class_is_not_rewritten():
    source = """
    class Probe:
        def usable(self, spec):
            return isinstance(spec, MambaSpec)

    class Other:
        def usable(self, spec):
            return spec.block_size > 0

        def run(self, kv_cache_config):
            return all(self.usable(g.kv_cache_spec) for g in kv_cache_config.kv_cache_groups)
    """
    findings, text = fixed(source, unsafe=True)
    assert "return all(self.usable(g.kv_cache_spec) for g in kv_cache_config.kv_cache_groups)" in text


def test_the_class_own_call_site_is_still_rewritten():
    source = """
    class Probe:
        def usable(self, spec):
            return isinstance(spec, MambaSpec)

        def run(self, kv_cache_config):
            return all(self.usable(g.kv_cache_spec) for g in kv_cache_config.kv_cache_groups)
    """
    findings, text = fixed(source, unsafe=True)
    assert "for spec in iter_layer_specs(g.kv_cache_spec))" in text


# -------------------------------------------------------------------------------- item 17: hygiene


def test_comments_inside_the_check_are_kept():
    source = IMPORTS + (
        "def worker(kv_cache_config):\n"
        "    for g in kv_cache_config.kv_cache_groups:\n"
        "        if isinstance(  # kvlint: ignore[KV102]\n"
        "            g.kv_cache_spec,  # the group's\n"
        "            MambaSpec,  # only mamba\n"
        "        ):\n"
        "            yield g\n"
    )
    _, text = fixed(source)
    for comment in ("# kvlint: ignore[KV102]", "# the group's", "# only mamba"):
        assert comment in text
    assert "iter_layer_specs(g.kv_cache_spec)" in text
    compile(text, PATH, "exec")


def test_a_tab_indented_file_stays_tab_indented():
    source = IMPORTS + (
        "def worker(kv_cache_config):\n"
        "\tfor g in kv_cache_config.kv_cache_groups:\n"
        "\t\tif isinstance(g.kv_cache_spec, (MambaSpec, CrossAttentionSpec)) and g.layer_names and kv_cache_config.num_blocks:\n"
        "\t\t\tyield g\n"
    )
    _, text = fixed(source)
    assert "iter_layer_specs(g.kv_cache_spec)" in text
    indents = [line[: len(line) - len(line.lstrip())] for line in text.splitlines()]
    assert all(set(i) <= {"\t"} for i in indents), text
    compile(text, PATH, "exec")


RUFF = shutil.which("ruff", path=str(Path(sys.executable).parent))


WRAPPED = "if isinstance(\n{i}    g.kv_cache_spec,\n{i}    MambaSpec,\n{i}):\n{i}    yield g\n"
FORMATTED = {
    # the rewrite fits where the check stood: joined on one line
    "fits": (
        "def worker(kv_cache_config):\n    g = kv_cache_config.kv_cache_groups[0]\n    " + WRAPPED.format(i="    "),
        "    if all(isinstance(spec, MambaSpec) for spec in iter_layer_specs(g.kv_cache_spec)):\n",
    ),
    # it does not: the call's content on a line of its own, as ruff format writes it
    "content fits": (
        "def worker(kv_cache_config):\n    for g in kv_cache_config.kv_cache_groups:\n        "
        + WRAPPED.format(i="        "),
        "        if all(\n            isinstance(spec, MambaSpec) for spec in iter_layer_specs(g.kv_cache_spec)\n        ):\n",
    ),
}


@pytest.mark.skipif(RUFF is None, reason="ruff is a test dependency")
@pytest.mark.parametrize("case", sorted(FORMATTED))
def test_a_fix_of_a_ruff_formatted_file_is_ruff_formatted(case, tmp_path):
    body, expected = FORMATTED[case]
    source = IMPORTS + "\n" + body
    _, text = fixed(source)
    target = tmp_path / "worker.py"
    for content in (source, text):
        target.write_text(content)
        result = subprocess.run(
            [RUFF, "format", "--isolated", "--check", "--diff", str(target)], capture_output=True, timeout=30
        )
        assert result.returncode == 0, (content, result.stdout.decode())
    assert expected in text


@pytest.mark.skipif(RUFF is None, reason="ruff is a test dependency")
@pytest.mark.parametrize("case", sorted(SHADOWED))
def test_shadowing_cases_add_no_ruff_finding(case, tmp_path):
    code, _ = SHADOWED[case]
    _, text = fixed(IMPORTS + code, unsafe=True)
    target = tmp_path / "worker.py"
    target.write_text(text)
    result = subprocess.run(
        [RUFF, "check", "--isolated", "--select", "F811,F401", "--output-format", "concise", str(target)],
        capture_output=True,
        timeout=30,
    )
    new = [line for line in result.stdout.decode().splitlines() if "F811" in line or "iter_layer_specs" in line]
    assert not new, result.stdout.decode()


# ------------------------------------------------------------------ walrus and f-strings (issue 27, item 7)


def test_a_walrus_in_the_checked_expression_gets_no_fix():
    """`iter_layer_specs(s := g.kv_cache_spec)` in a comprehension's iterable is a SyntaxError."""
    source = """
    def worker(kv_cache_config):
        for g in kv_cache_config.kv_cache_groups:
            if isinstance(s := g.kv_cache_spec, MambaSpec):
                yield s
    """
    findings, _ = fixed(source, unsafe=True)
    assert all(f.fix is None for f in findings)
    assert "`s := g.kv_cache_spec` holds an assignment expression" in findings[0].message


def test_a_check_inside_an_f_string_stays_on_one_line():
    """A line break inside an f-string's braces is valid only from Python 3.12 on."""
    source = IMPORTS + (
        "def worker(kv_cache_config):\n"
        "    for g in kv_cache_config.kv_cache_groups:\n"
        "        yield f'{isinstance(g.kv_cache_spec, (MambaSpec, CrossAttentionSpec))} is the answer for this group'\n"
    )
    _, text = fixed(source)
    line = next(line for line in text.splitlines() if "yield" in line)
    assert "for spec in iter_layer_specs(g.kv_cache_spec))} is the answer" in line
    ast.parse(text, feature_version=(3, 10))


# ------------------------------------------- a maintainer's reading: callers of an ungated product elsewhere


CALLED_WITH_A_GATED_SIZE = """
from vllm.v1.kv_cache_interface import AttentionSpec

def {name}(spec, dcp):
    return spec.block_size * dcp

def caller(kv_cache_config, dcp):
    groups = kv_cache_config.kv_cache_groups
    return [{name}(g.kv_cache_spec, dcp if isinstance(g.kv_cache_spec, AttentionSpec) else 1) for g in groups]
"""


@pytest.mark.parametrize(("name", "safe"), [("span", False), ("_span", True)])
def test_an_ungated_product_is_safe_only_when_no_other_module_can_pass_a_raw_size(name, safe):
    """This module's callers pass the gated size; another module may call a public `span(spec, dcp)` with
    the raw one, and the resolver would stop scaling Mamba there."""
    kv102 = rule_by_code("KV102")
    source = CALLED_WITH_A_GATED_SIZE.format(name=name).lstrip("\n")
    findings = lint_text(LintRequest(PATH, PATH, project_for(kv102.INVALID[0]), (kv102,)), source).findings
    fixes = [f.fix for f in findings if f.code == "KV102" and f.fix is not None]
    assert fixes and all((f.applicability.value == "safe") == safe for f in fixes)
