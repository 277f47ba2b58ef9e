"""`fix` never writes outside the scanned tree, even while another process keeps swapping the file's folder
for a symbolic link to a folder outside it (issue 21, item 5).

A real process swaps `pkg/` for a link to `outside/pkg/` (which holds the same buggy file) every 15 ms while
`kvlint fix` runs again and again; whatever each run managed to fix, the file outside stays as it was.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

from kvlint_runner import run_kvlint
from test_cli import BUGGY, make_tree

SWAPPER = textwrap.dedent(
    """\
    import os, sys, time
    folder, aside, outside = sys.argv[1:4]
    while not os.path.exists(folder + ".stop"):
        os.rename(folder, aside)
        os.symlink(outside, folder)
        time.sleep(0.015)
        os.unlink(folder)
        os.rename(aside, folder)
        time.sleep(0.015)
    """
)


def test_fix_never_writes_outside_while_a_folder_is_swapped_for_a_link(tmp_path):
    tree, outside = tmp_path / "tree", tmp_path / "outside" / "pkg"
    tree.mkdir()
    make_tree(tree)
    outside.mkdir(parents=True)
    (outside / "buggy.py").write_text(BUGGY)
    folder = tree / "pkg"
    swapper = subprocess.Popen([sys.executable, "-c", SWAPPER, str(folder), str(tree / "pkg.aside"), str(outside)])
    fixed_inside = 0
    try:
        deadline = time.monotonic() + 20
        runs = 0
        while runs < 40 and time.monotonic() < deadline:
            run_kvlint("fix", "--no-cache", "-j", "1", "pkg", cwd=tree)
            runs += 1
    finally:
        Path(str(folder) + ".stop").touch()
        swapper.wait(timeout=10)
        if not folder.is_dir() or folder.is_symlink():  # stopped between its two steps: put the folder back
            if folder.is_symlink():
                os.unlink(folder)
            os.rename(tree / "pkg.aside", folder)
    fixed_inside = (folder / "buggy.py").read_text() != BUGGY
    assert (outside / "buggy.py").read_text() == BUGGY, "fix wrote outside the scanned tree"
    assert sorted(path.name for path in outside.iterdir()) == ["buggy.py"], "a temporary file was left outside"
    assert runs >= 3, "too few runs to race"
    # Without the swapper the same fix goes through: the race, not the fix, is what the loop above exercised.
    if not fixed_inside:
        result = run_kvlint("fix", "--no-cache", "-j", "1", "pkg", cwd=tree)
        assert (folder / "buggy.py").read_text() != BUGGY, result.stderr


def test_a_swap_right_after_the_read_is_refused_not_followed(tmp_path, monkeypatch):
    """The race pinned to its worst moment: the folder becomes a link out of the tree just after the read."""
    from kvlint.fixing import fix_file

    tree, outside = tmp_path / "tree", tmp_path / "outside" / "pkg"
    tree.mkdir()
    make_tree(tree)
    outside.mkdir(parents=True)
    (outside / "buggy.py").write_text(BUGGY)
    folder = tree / "pkg"
    read = fix_file.read_original

    def read_then_swap(path):
        data = read(path)
        os.rename(folder, tree / "pkg.aside")
        os.symlink(outside, folder)
        return data

    monkeypatch.setattr(fix_file, "read_original", read_then_swap)
    result = run_kvlint("fix", "--no-cache", "-j", "1", "pkg", cwd=tree)
    assert (outside / "buggy.py").read_text() == BUGGY, "fix wrote outside the scanned tree"
    assert sorted(path.name for path in outside.iterdir()) == ["buggy.py"]
    assert "pkg/buggy.py: not fixed: its folder now leads out of the scanned tree: not written" in result.stderr
    assert (tree / "pkg.aside" / "buggy.py").read_text() == BUGGY  # the file inside: untouched too
