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
    └── EnvironmentProblem (RuntimeError)  missing Java, port in use, …
"""

from __future__ import annotations


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
        super().__init__(message)
        self.message = message
        self.source = source
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
            self.source = source
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


class UnknownProfileError(SiftbusError, KeyError):
    """No profile with this id is registered."""

    def __str__(self) -> str:  # KeyError would repr() the message
        return SiftbusError.__str__(self)


class DuplicateProfileError(SiftbusError, ValueError):
    """A profile with this id is already registered."""


class ConnectionLostError(SiftbusError, ConnectionError):
    """A peer went away; the operation may succeed after reconnecting."""

    retriable = True


class EnvironmentProblem(SiftbusError, RuntimeError):
    """The machine lacks something siftbus needs (Java for Spark, a free port, ...)."""


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
