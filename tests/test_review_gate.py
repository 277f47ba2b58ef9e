"""A review suggests only what `kvlint fix` applies (issue 27, item 7): a suggestion passes fix's own compile
gate (kvlint.fixing.apply.check_compiles), judged for the oldest Python the project supports (the base
revision's `requires-python`, else 3.10). Before, a check holding a walrus, or one inside a single-quoted
f-string, got a one-click suggestion that no Python (or only 3.12 and later) compiles, which `fix` refused."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import textwrap
from dataclasses import replace
from pathlib import Path

import pytest

from kvlint.errors import FixError
from kvlint.fixing.apply import check_compiles
from mini_vllm import CONFIG_PATH, MINI_VLLM, write_tree
from review_repos import git, kvlint
from test_review_mini import mini_repo, review_json

PROBE = "vllm/distributed/kv_transfer/kv_connector/v1/probe.py"
HEADER = "from vllm.v1.kv_cache_interface import MambaSpec\n"
# Three checks kvlint gives a safe fix: the first two fixes do not compile for Python 3.10.
FUNCTIONS = {
    "walrus": """
        def walrus(kv_cache_config):
            found = []
            for group in kv_cache_config.kv_cache_groups:
                if isinstance(s := group.kv_cache_spec, MambaSpec):
                    found.append(s)
            return found
        """,
    "f-string": """
        def shown(kv_cache_config):
            for group in kv_cache_config.kv_cache_groups:
                print(f'{isinstance(group.kv_cache_spec, MambaSpec)}')
        """,
    "plain": """
        def plain(kv_cache_config):
            return [g for g in kv_cache_config.kv_cache_groups if isinstance(g.kv_cache_spec, MambaSpec)]
        """,
}


def _module(*names: str) -> str:
    return HEADER + "".join("\n\n" + textwrap.dedent(FUNCTIONS[name]) for name in names)


def _fix_applies(tmp_path: Path, name: str) -> bool:
    """Whether `kvlint fix` writes the fix of that one check (in the miniature vLLM, alone in its module)."""
    tree = write_tree(tmp_path / f"fix-{name}", {**MINI_VLLM, PROBE: _module(name)})
    before = (tree / PROBE).read_text()
    run = kvlint("fix", "--no-cache", PROBE, cwd=tree)
    assert run.returncode in (0, 1), run.stdout + run.stderr
    return (tree / PROBE).read_text() != before


def test_a_review_suggests_exactly_the_fixes_kvlint_fix_applies(tmp_path):
    applies = {name: _fix_applies(tmp_path, name) for name in FUNCTIONS}
    # fix writes the f-string's check on one line (valid on 3.10) and gives a walrus none (issue 27, items 5-7)
    assert applies == {"walrus": False, "f-string": True, "plain": True}
    repo = mini_repo(tmp_path, MINI_VLLM[CONFIG_PATH])
    (repo / "pyproject.toml").write_text('[project]\nname = "v"\nrequires-python = ">=3.10"\n')
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "base: a project for Python 3.10 and later")
    git(repo, "checkout", "-qb", "pr")
    # The pull request cannot raise its own bar: the base revision's requires-python is the one judged.
    write_tree(repo, {PROBE: _module(*FUNCTIONS), "pyproject.toml": '[project]\nrequires-python = ">=3.14"\n'})
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "pr")
    run, payload = review_json(repo, "pr", "--exit-zero")
    assert run.returncode == 0, run.stderr
    lines = _module(*FUNCTIONS).splitlines()
    bodies, lines_of = {}, {}
    for comment in payload["comments"]:
        if "import part" in comment["body"]:
            continue
        name = next(n for n in FUNCTIONS if lines[comment["line"] - 1].strip() in textwrap.dedent(FUNCTIONS[n]))
        bodies[name], lines_of[name] = comment["body"], comment["line"]
    assert set(bodies) == set(FUNCTIONS)
    for name, body in bodies.items():
        assert ("```suggestion" in body) == applies[name], body
        if not applies[name]:  # the comment stays, without a suggestion and without promising a fix
            assert "kvlint fix` applies" not in body
    imports = [c for c in payload["comments"] if "import part" in c["body"]]
    # an import part for each fix suggested, none for the check that has no fix
    named = {int(n) for c in imports for n in re.findall(r"line (\d+)\.", c["body"])}
    assert named == {lines_of[name] for name, applied in applies.items() if applied}


def test_the_gate_judges_for_the_oldest_python_the_project_states():
    from kvlint.fixing.syntax_gate import DEFAULT_OLDEST, oldest_python

    walrus = "if (a := 1):\n    pass\n"
    check_compiles(walrus, "m.py", original="a = 1\n", oldest=(3, 8))
    with pytest.raises(FixError, match="does not compile on Python 3.7"):
        check_compiles(walrus, "m.py", original="a = 1\n", oldest=(3, 7))
    # An original that is not valid for that Python either: the running interpreter judges, as before.
    check_compiles(walrus + "b = 2\n", "m.py", original=walrus, oldest=(3, 7))
    assert oldest_python(b'[project]\nrequires-python = ">= 3.9, <3.14"\n') == (3, 9)
    assert oldest_python(b'[project]\nrequires-python = "~=3.11"\n') == (3, 11)
    assert oldest_python(b'[project]\nname = "x"\n') == DEFAULT_OLDEST == (3, 10)
    assert oldest_python(b"not toml [") == DEFAULT_OLDEST


# f-string replacement fields, each valid on 3.12 and later; `True`: also on Python 3.10 and 3.11.
F_STRINGS = {
    "x = f'{all(\n  1 for a in b\n)}'\n": False,
    "x = f'{'a'}'\n": False,
    "x = f'{f'a'}'\n": False,
    "x = f'{\"\\n\".join(a)}'\n": False,
    "x = f'''{a # c\n}'''\n": False,
    "x = f'''{f'{a\n}'}'''\n": False,
    "x = f'{\"a\"}' + f\"{x['k']!r:>{w}}\" + f'''{a\n}''' + f'a\\n{b}'\n": True,
    "x = f'''{'a'}'''\n": True,
    "x = rf'\\d{x}' + f'{x!r}' + f\"{'{'}\"\n": True,
}
_PROBE_F_STRINGS = """
import json, sys
sys.path.insert(0, sys.argv[1])
from kvlint.fixing.syntax_gate import syntax_error
print(json.dumps([syntax_error(text, "m.py", (3, 10)) is None for text in json.loads(sys.stdin.read())]))
"""


def _python_312() -> str | None:
    for name in ("python3.13", "python3.12", "python3.14"):
        path = shutil.which(name)
        if path is None:
            continue
        try:
            probe = subprocess.run([path, "-c", "import sys; assert sys.version_info >= (3, 12)"], timeout=30)
        except (OSError, subprocess.TimeoutExpired):
            continue
        if probe.returncode == 0:
            return path
    return None


def test_f_strings_only_python_3_12_reads_are_refused_for_an_older_project():
    """On Python 3.12+, ast's feature_version does not judge PEP 701; the gate's token check does, and agrees
    with Python 3.11's compiler (run here when it is this Python)."""
    texts = list(F_STRINGS)
    if sys.version_info < (3, 12):
        from kvlint.fixing.syntax_gate import syntax_error

        assert [syntax_error(text, "m.py", (3, 10)) is None for text in texts] == list(F_STRINGS.values())
        python = _python_312()
        if python is None:
            pytest.skip("no Python 3.12 or later to run the token check on")
        import json

        root = str(Path(__file__).resolve().parent.parent)
        run = subprocess.run(
            [python, "-I", "-c", _PROBE_F_STRINGS, root],
            input=json.dumps(texts),
            capture_output=True,
            text=True,
            timeout=60,
            env={k: v for k, v in os.environ.items() if not k.startswith("PYTHON")},
        )
        assert run.returncode == 0, run.stderr
        assert json.loads(run.stdout) == list(F_STRINGS.values())
    else:
        from kvlint.fixing.syntax_gate import syntax_error

        assert [syntax_error(text, "m.py", (3, 10)) is None for text in texts] == list(F_STRINGS.values())
        assert all(syntax_error(text, "m.py", (3, 12)) is None for text in texts)


def test_the_gate_finds_each_failing_fix_among_many_in_few_checks():
    from kvlint.review.fix_gate import MAX_CHECKS, REFUSED, FixGate
    from test_unwrap_fix import lint

    good = textwrap.dedent(FUNCTIONS["plain"])
    parts = [good.replace("def plain", f"def plain_{i}") for i in range(30)]
    text = HEADER + "\n\n" + "\n\n".join(parts)
    findings = [f for f in lint(text).findings if f.fix is not None and f.fix.applicability.value == "safe"]
    assert len(findings) == 30
    # kvlint's own fixes no longer fail the gate (a walrus gets no fix, an f-string's stays on one line): two
    # stand for one that would, a PEP 701 f-string (Python 3.12 and later only) in place of the rewrite
    for index in (7, 22):
        fix = findings[index].fix
        edits = tuple(replace(e, replacement="bool(f'{'x'}')") if e is fix.edits[0] else e for e in fix.edits)
        findings[index] = replace(findings[index], fix=replace(fix, edits=edits))
    gate = FixGate(text, "m.py", findings, (3, 10))
    refused = [f for f in findings if gate.refusal(f) is not None]
    assert [gate.refusal(f) for f in refused] == [REFUSED, REFUSED]
    assert refused == [findings[7], findings[22]]
    assert gate._checks <= 2 * 2 * 5 + 1 < MAX_CHECKS  # two bad among 30: halving, not one check each
