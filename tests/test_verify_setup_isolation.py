"""`kvlint verify --setup` builds the runtime with Pythons that run isolated (`-I`) from a folder kvlint made:
a `venv/` or `pip/` package in the folder the user runs kvlint from (a checkout) never runs in place of
the real one.

The build is real up to its first pip step, and fast: the interpreter that creates the virtualenv is this
one behind a wrapper that adds `--without-pip` (so the new environment has no pip, and that step fails with
"No module named pip" instead of installing torch).
"""

from __future__ import annotations

import sys

import pytest

from kvlint.verify import runtime_env

PLANTED = "import pathlib\npathlib.Path({marker!r}).write_text('ran')\n"


@pytest.mark.parametrize("package", ["venv", "pip"])
def test_a_package_in_the_working_folder_does_not_run_instead_of_venv_or_pip(package, tmp_path, monkeypatch):
    marker = tmp_path / f"{package}-ran"
    checkout = tmp_path / "checkout"
    (checkout / package).mkdir(parents=True)
    for name in ("__init__.py", "__main__.py"):
        (checkout / package / name).write_text(PLANTED.format(marker=str(marker)), encoding="utf-8")
    wheel = tmp_path / f"torch-{runtime_env.TORCH_VERSION}+cpu-cp311-cp311-linux_x86_64.whl"
    wheel.write_bytes(b"")
    wrapper = tmp_path / "python"
    wrapper.write_text(f'#!/bin/sh\nexec {sys.executable} "$@" --without-pip\n', encoding="utf-8")
    wrapper.chmod(0o755)
    monkeypatch.setenv("KVLINT_TORCH_WHEEL", str(wheel))
    monkeypatch.delenv("PYTHONPATH", raising=False)
    monkeypatch.setattr(sys, "executable", str(wrapper))
    monkeypatch.chdir(checkout)
    target = tmp_path / "environment"
    target.mkdir()
    with pytest.raises((RuntimeError, OSError)) as failed:
        runtime_env._build(target, [])
    assert not marker.exists(), f"the checkout's {package}/ ran"
    # the real venv made the environment (no pip in it, by the wrapper): pip is looked up there, not here
    assert (target / "bin" / "python").exists()
    assert "No module named pip" in str(failed.value)
