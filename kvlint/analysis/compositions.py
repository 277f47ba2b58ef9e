"""Kept for importers of the old module: the compositions live in kvlint.analysis.census.compositions."""

from kvlint.analysis.census.compositions import DEFAULT, ContainerComposition, compose, uniform_bases

__all__ = ["DEFAULT", "ContainerComposition", "compose", "uniform_bases"]
