"""PEP 440 version numbers, as far as naming a release needs them (kvlint does not depend on `packaging`).

`normalize` spells a version the one way PEP 440 allows (`V0.29.0-RC1` -> `0.29.0rc1`); `release_key`
also drops the release segment's trailing zeros, because `0.29` and `0.29.0` are the same release
(pip's `vllm==0.29` installs 0.29.0). Anything that is not a whole PEP 440 version is refused: no
surrounding whitespace, no newline, nothing after it.
"""

from __future__ import annotations

import re

# The grammar of PEP 440's appendix (as in `packaging.version.VERSION_PATTERN`), matched whole.
_PEP440 = re.compile(
    r"""
    v?
    (?:(?P<epoch>[0-9]+)!)?
    (?P<release>[0-9]+(?:\.[0-9]+)*)
    (?P<pre>[-_.]?(?P<pre_label>alpha|a|beta|b|preview|pre|c|rc)[-_.]?(?P<pre_number>[0-9]+)?)?
    (?P<post>-(?P<post_implicit>[0-9]+)|[-_.]?(?P<post_label>post|rev|r)[-_.]?(?P<post_number>[0-9]+)?)?
    (?P<dev>[-_.]?dev[-_.]?(?P<dev_number>[0-9]+)?)?
    (?:\+(?P<local>[a-z0-9]+(?:[-_.][a-z0-9]+)*))?
    """,
    re.VERBOSE | re.IGNORECASE | re.ASCII,  # ASCII: the Kelvin sign must not pass for a "k"
)
_PRE_LABELS = {"alpha": "a", "a": "a", "beta": "b", "b": "b", "c": "rc", "pre": "rc", "preview": "rc", "rc": "rc"}


def normalize(text: str) -> str:
    """The PEP 440 normal form of `text`; ValueError when it is not a version number."""
    return _spell(text, strip_zeros=False)


def release_key(text: str) -> str:
    """What two spellings of the same release share: `0.29`, `0.29.0` and `v0.29.00` all give `0.29`."""
    return _spell(text, strip_zeros=True)


def _spell(text: str, strip_zeros: bool) -> str:
    match = _PEP440.fullmatch(text) if isinstance(text, str) else None
    if match is None:
        raise ValueError(f"not a version number: {text!r}")
    release = [int(part) for part in match["release"].split(".")]
    while strip_zeros and len(release) > 1 and release[-1] == 0:
        release.pop()
    spelled = ".".join(map(str, release))
    if match["epoch"] and int(match["epoch"]):
        spelled = f"{int(match['epoch'])}!{spelled}"
    if match["pre"]:
        spelled += f"{_PRE_LABELS[match['pre_label'].lower()]}{int(match['pre_number'] or 0)}"
    if match["post"]:
        spelled += f".post{int(match['post_implicit'] or match['post_number'] or 0)}"
    if match["dev"]:
        spelled += f".dev{int(match['dev_number'] or 0)}"
    if match["local"]:
        spelled += "+" + ".".join(
            str(int(part)) if part.isdigit() else part.lower() for part in re.split(r"[-_.]", match["local"])
        )
    return spelled
