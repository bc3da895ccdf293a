"""The composite profile language: patterns of primitive profiles in time.

``syntax`` (the values), ``composite.lark`` (the grammar, the specification), ``parse``
and ``printer``. Semantics: docs/composite.md; evaluation: :mod:`siftbus.match.composite`.
"""

from siftbus.lang.composite.parse import (
    KEYWORDS,
    LIMITS,
    CompositeLimits,
    alternatives,
    iter_composite_lines,
    load_composites,
    parse_composite,
    parse_composites,
)
from siftbus.lang.composite.printer import format_component, format_composite, format_pattern
from siftbus.lang.composite.syntax import (
    UNITS,
    Component,
    CompositeProfile,
    Conjunction,
    Consumption,
    Disjunction,
    FollowedBy,
    Negation,
    Node,
    Pattern,
    Select,
    Windowed,
    component_id,
    format_duration,
    iter_components,
    labels_of,
)

__all__ = [
    "KEYWORDS",
    "LIMITS",
    "UNITS",
    "Component",
    "CompositeLimits",
    "CompositeProfile",
    "Conjunction",
    "Consumption",
    "Disjunction",
    "FollowedBy",
    "Negation",
    "Node",
    "Pattern",
    "Select",
    "Windowed",
    "alternatives",
    "component_id",
    "format_component",
    "format_composite",
    "format_duration",
    "format_pattern",
    "iter_components",
    "iter_composite_lines",
    "labels_of",
    "load_composites",
    "parse_composite",
    "parse_composites",
]
