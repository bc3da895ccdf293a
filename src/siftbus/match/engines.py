"""The matcher engines and what each can do: the one registry every user reads.

``siftbus match --engine NAME``, the broker (``engine =`` in a network file), the Spark
match stage, the benchmarks and the differential tests all take engines from here. Each
:class:`Engine` declares its :class:`Capability` set; code asks the registry
(``engine("index").has(Capability.SNAPSHOT)``, :func:`names`) instead of probing a
matcher's attributes, and ``tests/match/test_engines.py`` checks that every declaration
is true of the matcher the engine builds.

| engine      | capabilities                     | what                                 |
|-------------|----------------------------------|--------------------------------------|
| ``index``   | snapshot, bulk, kernels          | the PrimAS interval index (default)  |
| ``counting``| bulk, kernels                    | Siena's counting algorithm           |
| ``reference``| snapshot, oracle                | every profile against every event    |
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import MappingProxyType

from siftbus.match.base import Matcher
from siftbus.match.reference import ReferenceMatcher


class Capability(enum.Enum):
    """Something an engine's matchers can do beyond the :class:`Matcher` protocol."""

    SNAPSHOT = "snapshot"
    """:class:`~siftbus.match.base.Snapshotting`: a ``version`` and immutable, picklable
    ``snapshot()`` objects with a columnar ``match_columns`` (Spark's match stage, the
    broker's whole-block path)."""
    BULK = "bulk"
    """:class:`~siftbus.match.base.BulkLoading`: ``add_columns`` adds a whole batch of
    columnar profiles in one compile (``siftbus match``, loading a Spark plan)."""
    KERNELS = "kernels"
    """Runs on :mod:`siftbus.match.kernel` (numba, or the Python twin)."""
    ORACLE = "oracle"
    """The literal semantics, written for clarity: every other engine is tested against it."""


@dataclass(frozen=True, slots=True)
class Engine:
    """One registered engine."""

    name: str
    """What ``--engine`` and ``engine =`` take."""
    summary: str
    """One line for help texts."""
    capabilities: frozenset[Capability]
    """What its matchers can do (checked by the tests)."""
    factory: Callable[[], Matcher]
    """Builds an empty matcher."""

    def make(self) -> Matcher:
        """A new empty matcher."""
        return self.factory()

    def has(self, capability: Capability) -> bool:
        return capability in self.capabilities


def _index() -> Matcher:
    # Imported on use: the index needs numpy, which `siftbus --help` should not pay for.
    # extended profiles (checks, or, optional/nested/array/open kinds) ride in a side list
    from siftbus.match.residual import ResidualIndexMatcher

    return ResidualIndexMatcher()


def _counting() -> Matcher:
    from siftbus.match.residual import ResidualCountingMatcher

    return ResidualCountingMatcher()


_REGISTRY: dict[str, Engine] = {}

ENGINES: Mapping[str, Engine] = MappingProxyType(_REGISTRY)
"""Every registered engine by name, in registration order (read-only)."""

DEFAULT_ENGINE = "index"
"""The engine used when none is named."""


def register(entry: Engine) -> Engine:
    """Add an engine (a name may be registered once); returns it."""
    if entry.name in _REGISTRY:
        raise ValueError(f"engine {entry.name!r} is already registered")
    _REGISTRY[entry.name] = entry
    return entry


register(Engine("index", "the PrimAS interval index (Bittner 2003, §4.1)",
                frozenset({Capability.SNAPSHOT, Capability.BULK, Capability.KERNELS}), _index))
register(Engine("counting", "Siena's counting algorithm (Tarkoma 2006, §4.5)",
                frozenset({Capability.BULK, Capability.KERNELS}), _counting))
register(Engine("reference", "every profile against every event: the oracle",
                frozenset({Capability.SNAPSHOT, Capability.ORACLE}), ReferenceMatcher))


def engine(name: str, *, needs: Capability | None = None) -> Engine:
    """The engine called ``name``; ``ValueError`` names the choices (those with the
    capability ``needs``, when given)."""
    wanted = (needs,) if needs is not None else ()
    found = _REGISTRY.get(name)
    if found is None:
        raise ValueError(f"unknown engine {name!r}; choose one of {', '.join(names(*wanted))}")
    if needs is not None and not found.has(needs):
        raise ValueError(f"engine {name!r} has no {needs.value} capability; choose one of "
                         f"{', '.join(names(needs))}")
    return found


def names(*needs: Capability) -> tuple[str, ...]:
    """Names of the engines that have every capability in ``needs``."""
    return tuple(n for n, e in _REGISTRY.items() if all(e.has(c) for c in needs))


def make_matcher(name: str = DEFAULT_ENGINE) -> Matcher:
    """A new empty matcher of the named engine; ``ValueError`` names the choices."""
    return engine(name).make()


__all__ = ["DEFAULT_ENGINE", "ENGINES", "Capability", "Engine", "engine", "make_matcher",
           "names", "register"]
