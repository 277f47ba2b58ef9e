"""The import a fix adds reads like the file: sorted into its block as ruff's isort sorts it, a merged `from`
import sorted and wrapped as the file wraps its imports (kvlint.fixing.imports)."""

from __future__ import annotations

import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from kvlint.fixing.apply import apply_fixes
from kvlint.fixing.imports import add_from_import, line_length, member_key
from kvlint.types import Applicability, Finding, Fix, ImportChange, TextEdit

MODULE = "vllm.v1.core.kv_cache_utils"
NAME = "resolve_dcp_kv_block_size"


def add(source: str, module: str = MODULE, name: str = NAME) -> str | None:
    return add_from_import(textwrap.dedent(source), module, name)


def dedent(text: str) -> str:
    return textwrap.dedent(text)


def test_a_new_import_goes_into_its_section_in_module_order():
    source = '''\
        """A connector."""

        import os
        from dataclasses import dataclass

        import torch

        from vllm.config import VllmConfig
        from vllm.v1.kv_cache_interface import (
            AttentionSpec,
            MambaSpec,
        )
        from vllm.v1.request import Request

        if TYPE_CHECKING:
            from vllm.v1.core.sched.output import SchedulerOutput
        '''
    assert add(source) == dedent(source).replace(
        "from vllm.v1.kv_cache_interface import (",
        f"from {MODULE} import {NAME}\nfrom vllm.v1.kv_cache_interface import (",
    )


def test_modules_sort_case_insensitively_with_numbers_as_numbers():
    source = """\
        from vllm.V0 import a
        from vllm.v1.a import b
        from vllm.v10 import c
        """
    assert add(source, "vllm.v2", "x") == dedent(
        """\
        from vllm.V0 import a
        from vllm.v1.a import b
        from vllm.v2 import x
        from vllm.v10 import c
        """
    )


def test_plain_imports_stay_first_in_the_section():
    source = """\
        import vllm.envs as envs
        from vllm.z import c
        """
    assert add(source) == dedent(f"""\
        import vllm.envs as envs
        from {MODULE} import {NAME}
        from vllm.z import c
        """)


def test_comments_above_an_import_stay_with_it():
    source = """\
        from vllm.a import b

        # why c is imported
        from vllm.z import c
        """
    # The comment starts a block of its own (a blank line above it): the new import joins the first block.
    assert add(source) == dedent(f"""\
        from vllm.a import b
        from {MODULE} import {NAME}

        # why c is imported
        from vllm.z import c
        """)
    attached = "from vllm.a import b\n# why c is imported\nfrom vllm.z import c\n"
    assert add_from_import(attached, MODULE, NAME) == (
        f"from vllm.a import b\nfrom {MODULE} import {NAME}\n# why c is imported\nfrom vllm.z import c\n"
    )


def test_a_package_not_yet_imported_gets_a_block_before_the_relative_imports():
    source = """\
        import os

        import torch

        from . import sibling
        """
    assert add(source) == dedent(f"""\
        import os

        import torch

        from {MODULE} import {NAME}

        from . import sibling
        """)
    assert add("import os\n") == f"import os\n\nfrom {MODULE} import {NAME}\n"
    assert add("import os") == f"import os\n\nfrom {MODULE} import {NAME}\n"  # no newline at the end


def test_a_merged_import_is_sorted_and_stays_on_one_line_when_it_fits():
    source = f"from {MODULE} import MAX_BLOCKS, KVCacheBlock, trim_null_head\n"
    assert add(source, name="rsv") == (
        f"from {MODULE} import MAX_BLOCKS, KVCacheBlock, rsv, trim_null_head\n"  # 85 columns, of 88
    )


def test_a_merged_import_too_long_for_the_line_is_wrapped_one_name_a_line():
    source = f"from {MODULE} import resolve_kv_cache_block_sizes\n"
    assert add(source) == (
        f"from {MODULE} import (\n    resolve_dcp_kv_block_size,\n    resolve_kv_cache_block_sizes,\n)\n"
    )


def test_a_parenthesised_import_keeps_one_name_a_line():
    source = f"""\
        from {MODULE} import (
            KVCacheBlock,
            trim_null_head,
        )
        x = 1
        """
    assert add(source) == dedent(f"""\
        from {MODULE} import (
            KVCacheBlock,
            {NAME},
            trim_null_head,
        )
        x = 1
        """)


def test_names_sort_by_type_then_case_insensitively():
    names = ["zeta", "Alpha", "MAX", "beta", "Beta2", "A", "_private", "Beta10"]
    assert sorted(names, key=member_key) == ["MAX", "A", "Alpha", "Beta2", "Beta10", "_private", "beta", "zeta"]


def test_the_line_length_is_read_from_the_file():
    assert line_length("x = 1\n") == 79
    assert line_length("x = " + "1 + " * 20 + "1\n") == 88
    wide = "y = " + "1 + " * 24 + "1\n"  # 101 characters: a 120-column project
    assert line_length(wide) == 120
    # Strings and comments do not count: a formatter cannot shorten them.
    assert line_length("s = '" + "x" * 200 + "'\n# " + "y" * 200 + "\n") == 79
    source = wide + f"from {MODULE} import resolve_kv_cache_block_sizes\n"
    merged = add_from_import(source, MODULE, NAME)
    assert merged.endswith(f"from {MODULE} import {NAME}, resolve_kv_cache_block_sizes\n")


def test_an_import_already_there_changes_nothing():
    source = f"from {MODULE} import (\n    {NAME},\n)\n"
    assert add_from_import(source, MODULE, NAME) == source


def test_crlf_files_keep_crlf():
    source = f"import os\r\n\r\nfrom {MODULE} import zzz\r\n"
    assert add_from_import(source, MODULE, NAME) == f"import os\r\n\r\nfrom {MODULE} import {NAME}, zzz\r\n"


@pytest.mark.parametrize(
    "source",
    [
        f"from {MODULE} import a  # noqa: F401\n",  # a comment in the statement: not rewritten here
        "x = 1\n",  # no import block to sort into
        f"from {MODULE} import *\n",
    ],
)
def test_shapes_left_to_libcst(source):
    assert add_from_import(source, MODULE, NAME) is None


def test_apply_fixes_places_the_import_and_falls_back_to_libcst():
    source = dedent(
        """\
        import os

        from vllm.a import b
        from vllm.z import c


        def f(spec, dcp):
            return spec.block_size * dcp
        """
    )
    start = source.index("spec.block_size * dcp")
    end = start + len("spec.block_size * dcp")
    edit = TextEdit(start, end, f"{NAME}(spec, dcp)", 8, 12, 8, 33)
    fix = Fix("Replace", Applicability.SAFE, (edit,), (ImportChange(MODULE, NAME),))
    finding = Finding("x.py", 8, 12, 8, 33, "KV102", "hand-rolled-dcp-scaling", "m", fix=fix)
    outcome = apply_fixes(source, [finding], unsafe=False)
    assert outcome.text == source.replace(
        "from vllm.z import c", f"from {MODULE} import {NAME}\nfrom vllm.z import c"
    ).replace("spec.block_size * dcp", f"{NAME}(spec, dcp)")
    # No import block at all: libcst's AddImportsVisitor puts it at the top.
    bare = "def f(spec, dcp):\n    return spec.block_size * dcp\n"
    start = bare.index("spec.block_size")
    edit = TextEdit(start, start + len("spec.block_size * dcp"), f"{NAME}(spec, dcp)", 2, 12, 2, 33)
    finding = Finding("x.py", 2, 12, 2, 33, "KV102", "n", "m", fix=Fix("R", Applicability.SAFE, (edit,), fix.imports))
    assert apply_fixes(bare, [finding], unsafe=False).text.startswith(f"from {MODULE} import {NAME}\n")


def ruff_command() -> str:
    """The test extra's ruff: beside this interpreter (CI runs the venv's python without its bin on PATH)."""
    beside_python = Path(sys.executable).parent / "ruff"
    command = str(beside_python) if beside_python.exists() else shutil.which("ruff")
    assert command, "ruff is missing: pip install -e '.[test]'"
    return command


def test_ruff_isort_agrees_with_every_placement(tmp_path):
    """Each result above is what `ruff check --select I` (isort, vllm first-party) accepts as sorted."""
    ruff = ruff_command()
    sources = [
        "import os\nfrom dataclasses import dataclass\n\nimport torch\n\nfrom vllm.config import VllmConfig\n"
        "from vllm.v1.kv_cache_interface import (\n    AttentionSpec,\n    MambaSpec,\n)\nfrom vllm.v1.request import Request\n",
        "import vllm.envs as envs\nfrom vllm.z import c\n",
        "import os\n\nimport torch\n\nfrom . import sibling\n",
        f"from {MODULE} import MAX_BLOCKS, KVCacheBlock, trim_null_head\n",
        f"from {MODULE} import resolve_kv_cache_block_sizes\n",
        f"from {MODULE} import (\n    KVCacheBlock,\n    trim_null_head,\n)\n",
        "from vllm.aa import b\nfrom vllm.v1.core.block_pool import BlockPool\nfrom vllm.v1.core.sched import c\n",
    ]
    for index, source in enumerate(sources):
        path = tmp_path / f"case{index}.py"
        path.write_text(add_from_import(source, MODULE, NAME))
    result = subprocess.run(
        [
            ruff,
            "check",
            "--isolated",
            "--select",
            "I",
            "--line-length",
            "88",
            "--config",
            "lint.isort.known-first-party=['vllm']",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stdout
