"""Discover rules in `kvlint.rules`, check their codes are unique, and apply select/ignore.

A rule module is named after its code (`kv101_container_isinstance` holds KV101), so the codes a scan
selects are known from file names alone: a scan answered from the cache never imports the rules (nor
libcst, which they are built on). Importing them checks that each module's CODE matches its name.
"""

from __future__ import annotations

import importlib
import re
from functools import cache, lru_cache
from typing import TYPE_CHECKING

from kvlint.errors import RegistryError

if TYPE_CHECKING:
    from kvlint.engine.rule import Rule

_RULE_MODULE = re.compile(r"(kv\d{3})_\w+")


@lru_cache(maxsize=1)
def rule_modules() -> dict[str, str]:
    """Rule code → module name, read from the names of the modules in `kvlint.rules`."""
    import os

    import kvlint.rules as package

    names = sorted({name[:-3] for folder in package.__path__ for name in os.listdir(folder) if name.endswith(".py")})
    modules: dict[str, str] = {}
    for name in names:
        match = _RULE_MODULE.fullmatch(name)
        if match is None:
            continue
        code = match.group(1).upper()
        if code in modules:
            raise RegistryError(f"duplicate rule code {code}: modules {modules[code]} and {name}")
        modules[code] = f"{package.__name__}.{name}"
    return modules


def rule_codes() -> tuple[str, ...]:
    return tuple(sorted(rule_modules()))


@cache
def rule_class(code: str) -> type[Rule]:
    """Import the module of `code` and return its Rule subclass."""
    from kvlint.engine.rule import Rule

    module = importlib.import_module(rule_modules()[code])
    found = [
        v
        for v in vars(module).values()
        if isinstance(v, type) and issubclass(v, Rule) and v is not Rule and v.__module__ == module.__name__
    ]
    if len(found) != 1:
        raise RegistryError(f"{module.__name__} must define exactly one rule class, found {len(found)}")
    if found[0].CODE != code:
        raise RegistryError(f"{module.__name__} is named for {code} but its rule says CODE = {found[0].CODE!r}")
    return found[0]


def rules_for_codes(codes: tuple[str, ...] | list[str]) -> tuple[type[Rule], ...]:
    return tuple(rule_class(code) for code in codes)


def all_rules() -> tuple[type[Rule], ...]:
    return rules_for_codes(rule_codes())


def rule_by_code(code: str) -> type[Rule] | None:
    code = code.upper()
    return next((r for r in all_rules() if r.CODE == code or r.NAME == code.lower()), None)


def matches(code: str, selectors: list[str] | tuple[str, ...]) -> bool:
    return any(code.startswith(s.upper()) or s.upper() == "ALL" for s in selectors)


def codes_left_on(codes: tuple[str, ...], ignored: list[str] | tuple[str, ...]) -> tuple[str, ...]:
    """The codes of `codes` that the `ignored` codes or prefixes leave on."""
    return tuple(code for code in codes if not matches(code, ignored))


def select_codes(select: list[str] | None, ignore: list[str] | None) -> tuple[str, ...]:
    """The codes of the rules to run, in order; an unknown selector is an error."""
    known = rule_codes()
    for selector in (select or []) + (ignore or []):
        if selector.upper() != "ALL" and not any(code.startswith(selector.upper()) for code in known):
            raise RegistryError(f"unknown rule selector {selector!r} (known: {', '.join(known)})")
    chosen = tuple(code for code in known if select is None or matches(code, select))
    return codes_left_on(chosen, ignore or ())
