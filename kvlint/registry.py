"""Discover rules in `kvlint.rules`, check their codes are unique, and apply select/ignore."""

from __future__ import annotations

import importlib
import pkgutil
from functools import lru_cache

from kvlint.rule import Rule


class RegistryError(Exception):
    pass


@lru_cache(maxsize=1)
def all_rules() -> tuple[type[Rule], ...]:
    import kvlint.rules as package

    found: dict[str, type[Rule]] = {}
    for info in sorted(pkgutil.iter_modules(package.__path__), key=lambda i: i.name):
        module = importlib.import_module(f"{package.__name__}.{info.name}")
        for value in vars(module).values():
            if isinstance(value, type) and issubclass(value, Rule) and value is not Rule and value.__module__ == module.__name__:
                if value.CODE in found:
                    raise RegistryError(f"duplicate rule code {value.CODE}: {found[value.CODE].__name__} and {value.__name__}")
                found[value.CODE] = value
    return tuple(found[code] for code in sorted(found))


def rule_by_code(code: str) -> type[Rule] | None:
    code = code.upper()
    return next((r for r in all_rules() if r.CODE == code or r.NAME == code.lower()), None)


def matches(code: str, selectors: list[str] | tuple[str, ...]) -> bool:
    return any(code.startswith(s.upper()) or s.upper() == "ALL" for s in selectors)


def select_rules(select: list[str] | None, ignore: list[str] | None) -> tuple[type[Rule], ...]:
    known = {r.CODE for r in all_rules()}
    for selector in (select or []) + (ignore or []):
        if selector.upper() != "ALL" and not any(code.startswith(selector.upper()) for code in known):
            raise RegistryError(f"unknown rule selector {selector!r} (known: {', '.join(sorted(known))})")
    chosen = [r for r in all_rules() if select is None or matches(r.CODE, select)]
    return tuple(r for r in chosen if not (ignore and matches(r.CODE, ignore)))
