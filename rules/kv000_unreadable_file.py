"""## What it does
Reports a file kvlint cannot analyse: unreadable, undecodable, containing NUL bytes, too large, or not
valid Python. The rest of the scan goes on. Syntax errors are reported in files that could hold a
finding (their text passes the rules' cheap prefilter); other files are never parsed, which is what keeps
a full scan of vLLM fast.

## Why is this bad?
A file that cannot be parsed cannot be checked: a KV sizing bug in it would go unseen. The diagnostic
names the file and the cause so the scan result is never silently incomplete.

## Example
```python
def broken(:
```

## Use instead
Fix the file, or exclude it with `exclude` in `[tool.kvlint]`.

## Fix safety
No fix.
"""

from __future__ import annotations

from kvlint import Example, Rule


class UnreadableFile(Rule):
    __doc__ = __doc__
    CODE = "KV000"
    NAME = "unreadable-file"
    MESSAGE = "cannot analyse this file: {cause}"
    # Emitted by the engine, not by visiting a tree.
    ENGINE_ONLY = True

    VALID = [Example("x = 1\n")]
    INVALID = [
        Example("def broken(:\n    for g in kv_cache_config.kv_cache_groups: isinstance(g, AttentionSpec)\n"),
        Example("x = 1\x00\n"),
    ]
