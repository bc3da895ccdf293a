"""Named matcher engines, as chosen by ``siftbus match --engine NAME``.

Each entry builds an empty matcher. Engines register here so that the CLI, the
benchmarks and the differential tests can enumerate every implementation.
"""

from __future__ import annotations

from collections.abc import Callable

from siftbus.match.base import Matcher
from siftbus.match.reference import ReferenceMatcher


def _index() -> Matcher:
    # Imported on use: the index pulls in numba, which the CLI's --help should not pay for.
    from siftbus.match.index import IndexMatcher

    return IndexMatcher()


def _counting() -> Matcher:
    from siftbus.match.counting import CountingMatcher

    return CountingMatcher()


ENGINES: dict[str, Callable[[], Matcher]] = {
    "index": _index,
    "counting": _counting,
    "reference": ReferenceMatcher,
}

DEFAULT_ENGINE = "index"


def make_matcher(name: str) -> Matcher:
    """A new empty matcher of the named engine; ``ValueError`` names the choices."""
    try:
        factory = ENGINES[name]
    except KeyError:
        raise ValueError(f"unknown engine {name!r}; choose one of {', '.join(ENGINES)}") from None
    return factory()
