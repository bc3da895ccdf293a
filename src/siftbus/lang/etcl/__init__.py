"""The Extended Trader Constraint Language (ETCL): syntax, evaluation, compilation.

ETCL is the default filter constraint language of the OMG Notification Service (1.1,
§2.4), the Trading Service's TCL extended with component paths into the event::

    $domain_name == 'Telecom' and $.filterable_data(severity) >= 3
    exist $Priority and $Priority > 2          -- run-time variable, see below
    'alarm' ~ $event_name                      -- substring: left inside right
    5 in $.filterable_data(codes)              -- membership in a sequence

Modules, by subject (each imports only those above it, and ``model``):

=================  ====================================================================
``anys``           the values ETCL evaluates (:class:`Struct`, :class:`Union`), EvalError
``syntax``         the syntax tree and operator precedence
``printer``        tree -> ETCL text; values as short excerpts for messages
``parse``          text -> tree (``grammar.lark``), within :class:`ConstraintLimits`
``paths``          what a component path denotes in an event
``evaluate``       the operators, and a tree compiled to one closure
``explain``        why a constraint is TRUE, FALSE or an error on one event
``constraint``     :class:`Constraint` and :func:`parse_constraint`
``event_types``    EventTypeSeq patterns (``*`` wildcards) in linear time
``profiles``       conjunctive constraints -> siftbus profiles over a derived event type
=================  ====================================================================

Semantics (the TCL/ETCL rules, decisions documented in docs/channels.md):

* Numbers (int, float) compare and compute with each other; strings only with strings
  (code-point order); booleans only with booleans (FALSE < TRUE). Anything else, a
  missing component, division by zero, an integer overflow (beyond 2**1024) or a
  non-boolean where a boolean is needed is an *evaluation error*, and **a constraint that
  errors on an event does not match it**.
* ``and``/``or`` evaluate left to right and stop early (``TRUE or <error>`` is TRUE).
* Integer ``/`` integer truncates toward zero (CORBA ``long`` arithmetic, as JacORB and
  TAO do); any float operand gives a float.
* ``exist C`` is TRUE iff the component resolves (it never errors); ``default C`` is TRUE
  iff the union ``C`` holds its default member.
* ``$domain_name``, ``$type_name``, ``$event_name`` are the fixed header fields;
  ``$curtime`` is the current time as a ``TimeBase::UtcT`` struct (``.time`` in 100 ns
  units since 1582-10-15); any other ``$name`` is looked up in the variable header, then
  in the filterable data (first property of that name wins). A bare identifier ``name``
  is the filterable-data property of that name (TCL's "property").
* The empty constraint is TRUE.

The JSON form of anys, the clock and the filter index built on a matcher belong to the
channel layer (:mod:`siftbus.channel.values`, :mod:`siftbus.channel.clock`,
:mod:`siftbus.channel.filter_index`).
"""

from siftbus.lang.etcl.anys import TIMET_UNIX_OFFSET, EvalError, Struct, Union, timet_from_unix_ns
from siftbus.lang.etcl.constraint import Constraint, parse_constraint
from siftbus.lang.etcl.event_types import WILDCARDS, event_type_of, name_matches, types_match
from siftbus.lang.etcl.parse import DEFAULT_LIMITS, KEYWORDS, ConstraintLimits, parse
from siftbus.lang.etcl.paths import is_structured, resolve, structured_view
from siftbus.lang.etcl.printer import format_node
from siftbus.lang.etcl.profiles import (
    Atom,
    DerivedType,
    FieldRef,
    compile_constraint,
    conjuncts,
    num_key,
)
from siftbus.lang.etcl.syntax import Node, Path, Step

__all__ = [
    "DEFAULT_LIMITS",
    "KEYWORDS",
    "TIMET_UNIX_OFFSET",
    "WILDCARDS",
    "Atom",
    "Constraint",
    "ConstraintLimits",
    "DerivedType",
    "EvalError",
    "FieldRef",
    "Node",
    "Path",
    "Step",
    "Struct",
    "Union",
    "compile_constraint",
    "conjuncts",
    "event_type_of",
    "format_node",
    "is_structured",
    "name_matches",
    "num_key",
    "parse",
    "parse_constraint",
    "resolve",
    "structured_view",
    "timet_from_unix_ns",
    "types_match",
]
