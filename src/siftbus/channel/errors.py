"""The exceptions the Notification Service specification defines, as Python exceptions.

All derive from :class:`siftbus.errors.SiftbusError` (so the CLI and servers report them
as one line) and from the builtin they refine::

    ChannelError (SiftbusError)
    ├── ObjectNotExist (RuntimeError)          a call on a destroyed channel/admin/proxy/filter
    ├── ChannelNotFound, AdminNotFound, ProxyNotFound, FilterNotFound,
    │   ConstraintNotFound, CallbackNotFound (KeyError)
    ├── AlreadyConnected, NotConnected, Disconnected,
    │   ConnectionAlreadyActive, ConnectionAlreadyInactive (RuntimeError)
    ├── ClientTypeError (TypeError)            connect with the wrong kind of client (TypeError)
    ├── InvalidGrammar (ValueError)            create_filter with a grammar other than EXTENDED_TCL
    ├── InvalidConstraint (ConstraintError)    a constraint that does not parse; .constraint
    ├── UnsupportedQoS / UnsupportedAdmin (ValueError)   .errors: PropertyError list
    ├── AdminLimitExceeded (RuntimeError)      MaxConsumers/MaxSuppliers; .name, .value
    ├── ImplLimit (RuntimeError, retriable)    full queue with RejectNewEvents (IMPL_LIMIT)
    └── UnsupportedFilterableData (ValueError)

(They live here rather than in ``siftbus/errors.py`` so this layer owns them.)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from siftbus.errors import ConstraintError, SiftbusError


class ChannelError(SiftbusError):
    """Root of the notification-service errors."""


class ObjectNotExist(ChannelError, RuntimeError):
    """CORBA::OBJECT_NOT_EXIST: the object was destroyed."""


class _NotFound(ChannelError, KeyError):
    def __str__(self) -> str:  # KeyError would repr() the message
        return SiftbusError.__str__(self)


class ChannelNotFound(_NotFound):
    """No channel with this id."""


class AdminNotFound(_NotFound):
    """No admin with this id in the channel."""


class ProxyNotFound(_NotFound):
    """No proxy with this id in the admin."""


class FilterNotFound(_NotFound):
    """No filter with this id on the object."""


class ConstraintNotFound(_NotFound):
    """No constraint with this id in the filter."""


class CallbackNotFound(_NotFound):
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


class InvalidConstraint(ConstraintError):
    """A constraint expression does not parse; ``constraint`` is the offending one."""

    def __init__(self, message: str, *, constraint: Any = None, **kw: Any) -> None:
        super().__init__(message, **kw)
        self.constraint = constraint


class UnsupportedFilterableData(ChannelError, ValueError):
    """The filter cannot inspect this event at all."""


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


ERROR_TYPES: dict[str, type[SiftbusError]] = {
    cls.__name__: cls
    for cls in (ChannelError, ObjectNotExist, ChannelNotFound, AdminNotFound, ProxyNotFound,
                FilterNotFound, ConstraintNotFound, CallbackNotFound, AlreadyConnected,
                NotConnected, Disconnected, ConnectionAlreadyActive,
                ConnectionAlreadyInactive, ClientTypeError, InvalidGrammar,
                InvalidConstraint, UnsupportedFilterableData, AdminLimitExceeded, ImplLimit)
}
"""Error classes by name (what the remote service sends back)."""
