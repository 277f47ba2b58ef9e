"""The fix-safety property in the real vLLM 0.29.0 (slow): generated container-blind checks
(tests/fix_programs.py) put in a copy of the 0.29.0 tree, evaluated by `verify --rewrites`'s own code
(kvlint/verify/checks.py and its child) with the rest of the tree's rewrites, then fixed by `kvlint fix` and
run, as written and as fixed, in the CPU runtime: every safe fix answers as before for a plain spec of every
class, and a container never reaches a use the check guarded."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
import fix_programs as generated  # noqa: E402

GENERATED = "vllm/distributed/kv_transfer/kv_connector/v1/generated"


@pytest.mark.slow
def test_generated_fixes_answer_as_before_in_the_real_vllm(vllm_runtime_env, vllm_copy, tmp_path):
    from kvlint.scan.config import Config
    from kvlint.verify.checks import cases_document, collect_cases, render_checks
    from kvlint.verify.run import ChildRun, run_child_raw

    tree = vllm_copy("0.29.0")
    folder = tree / GENERATED
    folder.mkdir()
    (folder / "__init__.py").write_text("")
    # 100: about one program in six meets a container the census proves with a safe fix (issue 26's census
    # reads fewer containers than the 60 drawn before needed)
    programs = generated.sample(100, seed=27)
    for index, program in enumerate(programs):
        (folder / f"check_{index}.py").write_bytes(program.source.encode())
    originals = tmp_path / "originals"
    shutil.copytree(folder, originals)

    # verify --rewrites: every rewrite of the tree, the generated checks' among them, in the real vLLM
    cases, compositions, _ = collect_cases(tree, Config())
    ours = [c for c in cases if c.site.startswith(GENERATED)]
    assert len({c.site.split(":")[0] for c in ours if c.applicability == "safe"}) >= 10, [c.site for c in ours]
    document = tmp_path / "checks.json"
    document.write_text(json.dumps(cases_document(cases, compositions)), encoding="utf-8")
    run = ChildRun(python=str(vllm_runtime_env.python), vllm_path=None, timeout_s=300)
    raw = run_child_raw(run, ["--checks", str(document)])
    table, _ = render_checks(cases, raw)
    results = {r["site"]: r for r in raw["checks"]}
    for case in ours:
        if case.before is None or case.applicability != "safe":
            continue
        plain = [p for p in results[case.site]["plain"] if p["ok"] is not None]
        if any(isinstance(p["before"], str) for p in plain):
            continue  # the child evaluates in the interface's namespace: a module's own name (EXTRA) is not there
        assert plain and all(p["ok"] for p in plain), (case, table)
        checked = [c for c in results[case.site]["containers"] if c["ok"] is not None]
        assert all(c["ok"] for c in checked), (case, table)

    # kvlint fix (safe fixes only), then each program as written and as fixed in the runtime
    fix = subprocess.run(
        [sys.executable, "-m", "kvlint", "fix", "--no-cache", GENERATED],
        cwd=tree,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert fix.returncode in (0, 1) and "not fixed" not in fix.stderr, fix.stderr
    changed = [
        i
        for i in range(len(programs))
        if (folder / f"check_{i}.py").read_bytes() != (originals / f"check_{i}.py").read_bytes()
    ]
    assert len(changed) >= 10
    job = {
        "classes": sorted({name for c in compositions for name in c} | {"SlidingWindowSpec", "CrossAttentionSpec"}),
        "compositions": compositions,
        "programs": [[str(originals / f"check_{i}.py"), str(folder / f"check_{i}.py")] for i in changed],
    }
    (tmp_path / "job.json").write_text(json.dumps(job))
    (tmp_path / "run.py").write_text(generated.RUNTIME_SCRIPT)
    completed = subprocess.run(
        [
            str(vllm_runtime_env.python),
            "-I",
            str(tmp_path / "run.py"),
            str(tmp_path / "job.json"),
            str(tmp_path / "out.json"),
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert completed.returncode == 0, completed.stderr[-4000:]
    out = json.loads((tmp_path / "out.json").read_text())
    assert {"MambaSpec", "FullAttentionSpec", "MLAAttentionSpec", "CrossAttentionSpec"} <= set(out["classes"])
    for path, result in out["results"].items():
        source = Path(path).read_text()
        assert "load_error" not in result, (result, source)
        for name, (before, after) in result["plain"].items():
            assert before == after, (name, before, after, source)
        for layers, answer in result["containers"]:
            assert "UniformTypeKVCacheSpecs" not in answer.get("seen", []), (layers, answer, source)
