"""The one error tree of siftbus.

Every bad input raises a subclass of :class:`SiftbusError`; each also subclasses the
builtin it refines, so ``except ValueError`` keeps working for callers who do not know
siftbus. Errors carry where the problem is (source, line, column; lines and columns
counted from 1, as editors do) and whether retrying the same operation can help.

::

    SiftbusError
    ├── InputError (ValueError)            bad input with a location
    │   ├── SchemaError                    schema file or type spec
    │   ├── ProfileError                   profile text or meaning
    │   │   ├── ProfileSyntaxError
    │   │   └── UnsatisfiableProfileError  conditions that no event can meet
    │   ├── EventError                     event JSON or values
    │   ├── DomainError                    a value outside its attribute's domain
    │   ├── ConstraintError                ETCL constraint text (channel layer)
    │   ├── XmlFilterError                 XML subscriptions, XPath subset, XML input
    │   │   ├── XPathSubsetError           expression outside the restricted XPath (position)
    │   │   ├── SubscriptionError          invalid subscription document or value
    │   │   │   └── DuplicateSubscriptionError  exact duplicate or id already taken
    │   │   └── XmlInputError              malformed XML event input
    │   ├── WireError                      a malformed, oversized or unknown frame
    │   └── ConfigError                    TOML configs (network, pipeline)
    ├── UnknownProfileError (KeyError)     remove/lookup of an id that is not there
    │   └── UnknownSubscriptionError       unsubscribe of an XML subscription id not there
    ├── DuplicateProfileError (ValueError) add of an id that is already there
    ├── ConnectionLostError (ConnectionError, retriable)
    ├── RemoteError                        a broker answered a client request with ERROR
    ├── SecurityError (PermissionError)    who may do what
    │   ├── AuthenticationError            no, bad, expired or tampered credentials
    │   ├── AccessDenied                   a principal's rights do not allow the action
    │   └── QuotaExceeded (retriable)      a principal's quota is used up for now
    ├── EnvironmentProblem (RuntimeError)  missing Java, port in use, …
    └── ChannelError                       notification channels (the CosNotification
        │                                  specification's exceptions)
        ├── ObjectNotExist (RuntimeError)  a call on a destroyed channel/admin/proxy/filter
        ├── ChannelNotFound, AdminNotFound, ProxyNotFound, FilterNotFound,
        │   ConstraintNotFound, CallbackNotFound (KeyError)
        ├── AlreadyConnected, NotConnected, Disconnected,
        │   ConnectionAlreadyActive, ConnectionAlreadyInactive (RuntimeError)
        ├── ClientTypeError (TypeError)    connect/obtain with the wrong kind of client
        ├── InvalidGrammar (ValueError)    a filter grammar other than EXTENDED_TCL
        ├── InvalidConstraint (ConstraintError)  a constraint that does not parse
        ├── UnsupportedQoS, UnsupportedAdmin (ValueError)  ``errors``: PropertyError list
        ├── AdminLimitExceeded (RuntimeError)    MaxConsumers/MaxSuppliers reached
        ├── ImplLimit (RuntimeError, retriable)  full queue with RejectNewEvents
        ├── UnsupportedFilterableData (ValueError)
        └── TypedEventError (TypeError)    a typed channel's interface, or a call it refuses
            └── UnknownOperation (AttributeError)  an operation the interface lacks

An error's text is always one readable line: the message is cut to
:data:`MAX_MESSAGE` characters (its start and its end, with the length of the whole)
and control characters are escaped, whatever the input held. A 100 MB bad value
gives a short error line, and a hostile value cannot move a terminal's cursor. The cut is
made here, once, for every layer; :func:`excerpt` shortens a single value inside a
message.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

MAX_MESSAGE = 360
"""Longest error message kept (characters); longer ones keep their start and end."""

MAX_SOURCE = 160
"""Longest source name kept (characters); longer ones keep their end (the file name)."""

# Every character str.splitlines() breaks on, every other C0/C1 control, and DEL: shown
# escaped so that an error is one line and cannot drive a terminal.
_CONTROL = re.compile(r"[\x00-\x08\x0a-\x1f\x7f-\x9f\u2028\u2029]")


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def excerpt(text: str, width: int = 60) -> str:
    """``text`` as one line of at most ``width`` characters (``width`` >= 30).

    Longer text keeps its start and end around ``… (N characters) …``, N being the length
    of the whole text; control characters are escaped (``\\x0a``). Only the kept parts
    are looked at, so a value of any size costs the same. Used for values quoted inside
    error messages, and by every error for its whole message.
    """
    if len(text) <= width:
        escaped = _CONTROL.sub(_escape, text)
        if len(escaped) <= width:
            return escaped
    marker = f"… ({len(text)} characters) …"
    tail = max((width - len(marker)) // 3, 1)
    head = max(width - len(marker) - tail, 1)
    # escaping never shortens text, so escaping `width` characters of each end is enough
    return (_CONTROL.sub(_escape, text[:width])[:head] + marker
            + _CONTROL.sub(_escape, text[-width:])[-tail:])


def _source_name(source: str) -> str:
    """A source name of at most :data:`MAX_SOURCE` characters, keeping its end."""
    escaped = _CONTROL.sub(_escape, source[-MAX_SOURCE:])
    if len(source) <= MAX_SOURCE and len(escaped) <= MAX_SOURCE:
        return escaped
    return "…" + escaped[-(MAX_SOURCE - 1):]


class SiftbusError(Exception):
    """Root of every error siftbus raises on purpose."""

    retriable: bool = False

    def __init__(
        self,
        message: str,
        *,
        source: str | None = None,
        line: int | None = None,
        column: int | None = None,
        field: str | None = None,
    ) -> None:
        message = excerpt(message, MAX_MESSAGE)
        super().__init__(message)
        self.message = message
        self.source = _source_name(source) if source else source
        self.line = line
        self.column = column
        #: the offending field (attribute, key) when the error is about one
        self.field = field

    def located(
        self,
        *,
        source: str | None = None,
        line: int | None = None,
        column: int | None = None,
    ) -> SiftbusError:
        """Fill in location fields that are still unknown; returns ``self``."""
        if self.source is None and source is not None:
            self.source = _source_name(source)
        if self.line is None and line is not None:
            self.line = line
        if self.column is None and column is not None:
            self.column = column
        return self

    @property
    def where(self) -> str:
        """``source:line:column`` with whatever parts are known, or ``""``."""
        parts: list[str] = []
        if self.source is not None:
            parts.append(self.source)
        if self.line is not None:
            parts.append(f"line {self.line}")
            if self.column is not None:
                parts.append(f"column {self.column}")
        return ", ".join(parts)

    def __str__(self) -> str:
        where = self.where
        return f"{where}: {self.message}" if where else self.message


class InputError(SiftbusError, ValueError):
    """Bad input: text, file or value that siftbus refuses."""


class SchemaError(InputError):
    """A schema file or attribute type specification is invalid."""


class ProfileError(InputError):
    """A profile is invalid (unknown type or attribute, wrong operator for a domain)."""


class ProfileSyntaxError(ProfileError):
    """A profile line does not follow the grammar."""


class UnsatisfiableProfileError(ProfileError):
    """The conditions of a profile exclude every event of its type."""


class EventError(InputError):
    """An event is invalid: bad JSON, unknown type, missing/extra/duplicate attribute."""


class DomainError(InputError):
    """A value lies outside its attribute's domain or has the wrong kind."""


class ConstraintError(InputError):
    """An ETCL constraint does not parse or cannot be used."""


class XmlFilterError(InputError):
    """An XML subscription, restricted XPath expression or XML input is invalid."""


class WireError(InputError):
    """A wire frame is malformed, oversized, of an unknown type or version."""


class ConfigError(InputError):
    """A configuration file (network, pipeline, channel) is invalid."""


class CapacityError(SiftbusError):
    """A structure would exceed its documented memory budget (the index's:
    ``SIFTBUS_INDEX_BUDGET``); nothing was added."""


class UnknownProfileError(SiftbusError, KeyError):
    """No profile with this id is registered."""

    def __str__(self) -> str:  # KeyError would repr() the message
        return SiftbusError.__str__(self)


class DuplicateProfileError(SiftbusError, ValueError):
    """A profile with this id is already registered."""


class ConnectionLostError(SiftbusError, ConnectionError):
    """A peer went away; the operation may succeed after reconnecting."""

    retriable = True


class BrokerUnavailable(ConnectionLostError):
    """No broker could be reached (the first connect, or every reconnection attempt)."""


class TimedOut(SiftbusError, TimeoutError):
    """Nothing came within the time asked for (a notification, a broker's answer)."""

    retriable = True


class EnvironmentProblem(SiftbusError, RuntimeError):
    """The machine lacks something siftbus needs (Java for Spark, a free port, ...)."""


class MissingExtra(EnvironmentProblem, ImportError):
    """An optional part of siftbus is used without its extra installed
    (``pip install 'siftbus[gateway]'``); ``extra`` names it."""

    def __init__(self, extra: str, module: str, what: str) -> None:
        super().__init__(f"{what} needs the {extra} extra ({module} is not installed): "
                         f"pip install 'siftbus[{extra}]'", field=extra)
        self.extra = extra
        self.module = module


def require_extra(extra: str, what: str, *modules: str) -> None:
    """Raise :class:`MissingExtra` unless every module of ``modules`` can be imported
    (found, not imported: the check costs no start-up)."""
    from importlib.util import find_spec

    for module in modules:
        try:
            found = find_spec(module) is not None
        except (ImportError, ValueError):
            found = False
        if not found:
            raise MissingExtra(extra, module, what)


class XPathSubsetError(XmlFilterError):
    """A target or attribute path uses XPath outside the restricted subset.

    ``position`` is the 1-based character offset inside the expression; ``field`` holds the
    expression itself.
    """

    def __init__(self, message: str, *, position: int, expression: str, **kw: object) -> None:
        super().__init__(message, field=expression, **kw)  # type: ignore[arg-type]
        self.position = position


class SubscriptionError(XmlFilterError):
    """An XML subscription is invalid (schema, unknown operator, bad operand, no receiver)."""


class DuplicateSubscriptionError(SubscriptionError):
    """The same subscription (or one with the same id) is already registered."""


class XmlInputError(XmlFilterError):
    """XML event input is not well-formed."""


class UnknownSubscriptionError(UnknownProfileError):
    """No XML subscription with this id is registered."""


class RemoteError(SiftbusError):
    """A broker answered a client's request with ERROR; ``kind`` names the remote error
    class (e.g. ``ProfileSyntaxError``) and line/column/field are copied from it."""

    def __init__(self, message: str, *, kind: str = "", **kw: object) -> None:
        super().__init__(message, **kw)  # type: ignore[arg-type]
        self.kind = kind


class SecurityError(SiftbusError, PermissionError):
    """Authentication, authorization and quotas: who may do what."""


class AuthenticationError(SecurityError):
    """Credentials are missing, malformed, expired, tampered with or not trusted."""


class AccessDenied(SecurityError):
    """The principal's rights do not allow the action on this object.

    ``principal``, ``action`` and ``object`` name the denial as it is logged and counted.
    """

    def __init__(self, message: str, *, principal: str = "", action: str = "",
                 object: str = "", **kw: object) -> None:
        super().__init__(message, **kw)  # type: ignore[arg-type]
        self.principal = principal
        self.action = action
        self.object = object


class QuotaExceeded(SecurityError):
    """A quota of the principal is used up; retrying later (or after freeing) can help."""

    retriable = True

    def __init__(self, message: str, *, quota: str = "", limit: float = 0.0,
                 **kw: object) -> None:
        super().__init__(message, **kw)  # type: ignore[arg-type]
        self.quota = quota
        self.limit = limit


# ---------------------------------------------------------------------------------------
# Notification channels (siftbus.channel): the CosNotification specification's exceptions


class ChannelError(SiftbusError):
    """Root of the notification-channel errors."""


class ObjectNotExist(ChannelError, RuntimeError):
    """CORBA::OBJECT_NOT_EXIST: the channel, admin, proxy or filter was destroyed."""


class _ChannelLookupError(ChannelError, KeyError):
    def __str__(self) -> str:  # KeyError would repr() the message
        return SiftbusError.__str__(self)


class ChannelNotFound(_ChannelLookupError):
    """No channel with this id."""


class AdminNotFound(_ChannelLookupError):
    """No admin with this id in the channel."""


class ProxyNotFound(_ChannelLookupError):
    """No proxy with this id in the admin."""


class FilterNotFound(_ChannelLookupError):
    """No filter with this id on the object."""


class ConstraintNotFound(_ChannelLookupError):
    """No constraint with this id in the filter."""


class CallbackNotFound(_ChannelLookupError):
    """No callback with this id on the filter."""


class AlreadyConnected(ChannelError, RuntimeError):
    """The proxy already has a client."""


class NotConnected(ChannelError, RuntimeError):
    """The proxy has no client (suspend/resume before connect)."""


class Disconnected(ChannelError, RuntimeError):
    """The proxy was disconnected; push/pull on it fail."""


class ConnectionAlreadyActive(ChannelError, RuntimeError):
    """resume_connection on a connection that is not suspended."""


class ConnectionAlreadyInactive(ChannelError, RuntimeError):
    """suspend_connection on a connection that is already suspended."""


class ClientTypeError(ChannelError, TypeError):
    """CosEventChannelAdmin::TypeError: the client is of the wrong kind for this proxy."""


class InvalidGrammar(ChannelError, ValueError):
    """The filter grammar is not supported (only ``EXTENDED_TCL``)."""


class InvalidConstraint(ChannelError, ConstraintError):
    """A filter constraint does not parse; ``constraint`` is the offending one."""

    def __init__(self, message: str, *, constraint: Any = None, **kw: Any) -> None:
        super().__init__(message, **kw)
        self.constraint = constraint


class UnsupportedFilterableData(ChannelError, ValueError):
    """The filter cannot inspect this event at all."""


class TypedEventError(ChannelError, TypeError):
    """A typed channel's interface is unusable, or a typed call does not fit it."""


class UnknownOperation(TypedEventError, AttributeError):
    """A typed supplier called an operation its channel's interface does not have."""


@dataclass(frozen=True, slots=True)
class PropertyError:
    """One refused QoS or admin property (CosNotification::PropertyError)."""

    code: str
    """UNSUPPORTED_PROPERTY, UNAVAILABLE_PROPERTY, UNSUPPORTED_VALUE, UNAVAILABLE_VALUE,
    BAD_PROPERTY, BAD_TYPE or BAD_VALUE."""
    name: str
    """The property."""
    available: tuple[Any, Any] | None = None
    """The range that would be accepted, when there is one."""
    reason: str = ""
    """Why, in words."""


class _PropertyErrors(ChannelError, ValueError):
    def __init__(self, errors: list[PropertyError]) -> None:
        text = "; ".join(f"{e.name}: {e.code}" + (f" ({e.reason})" if e.reason else "")
                         for e in errors)
        super().__init__(text, field=errors[0].name if errors else None)
        self.errors = errors


class UnsupportedQoS(_PropertyErrors):
    """CosNotification::UnsupportedQoS."""


class UnsupportedAdmin(_PropertyErrors):
    """CosNotification::UnsupportedAdmin."""


class AdminLimitExceeded(ChannelError, RuntimeError):
    """CosNotifyChannelAdmin::AdminLimitExceeded; ``name``/``value`` is the AdminLimit."""

    def __init__(self, name: str, value: int) -> None:
        super().__init__(f"admin limit {name} = {value} reached", field=name)
        self.name = name
        self.value = value


class ImplLimit(ChannelError, RuntimeError):
    """CORBA::IMPL_LIMIT: the channel queue is full and RejectNewEvents is set."""

    retriable = True
