"""Open attribute kinds: ``int`` (int64), ``float``, ``bool``, ``timestamp`` and ``ip``.

Each is an *ordered* domain whose keys are integers that preserve order, so everything
built on :class:`~siftbus.model.constraint.IntervalSet` (ranges, sets, ``!=``, covering)
works on them unchanged and exactly:

* ``float``: the IEEE-754 double mapped to an int64 that sorts as the doubles do
  (``-0.0`` is ``0.0``; NaN and infinities are refused), so ``x < 1.5`` is the interval of
  every double below 1.5, with no grid;
* ``int``: the key is the integer, within int64;
* ``bool``: ``false`` < ``true`` (keys 0 and 1); events carry JSON ``true``/``false``;
* ``timestamp``: RFC 3339 text in events and profiles, keyed by nanoseconds since the
  epoch (UTC), so instants written in different offsets compare as instants;
* ``ip``: IPv4 and IPv6 addresses as one 128-bit space (IPv4 is ``::ffff:a.b.c.d``), so a
  ``cidr`` block is one interval.
"""

from __future__ import annotations

import ipaddress
import json
import math
import re
import struct
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta, timezone
from decimal import Decimal

from siftbus.errors import DomainError, ProfileError, excerpt

Key = int | str


def quote_string(text: str) -> str:
    return json.dumps(text, ensure_ascii=False)


INT64_MIN = -(1 << 63)
INT64_MAX = (1 << 63) - 1


def _shown(value: object) -> str:
    return excerpt(repr(value), 60)


def _is_number(value: object) -> bool:
    return isinstance(value, int | float | Decimal) and not isinstance(value, bool)


@dataclass(frozen=True, slots=True)
class Int64Domain:
    """Every int64 (``int`` in a schema)."""

    @property
    def ordered(self) -> bool:
        return True

    @property
    def spec(self) -> str:
        return "int"

    @property
    def min_key(self) -> int:
        return INT64_MIN

    @property
    def max_key(self) -> int:
        return INT64_MAX

    @property
    def size(self) -> int:
        return self.max_key - self.min_key + 1

    def key(self, value: object) -> int:
        if not _is_number(value):
            raise DomainError(f"{_shown(value)} is not an integer")
        assert isinstance(value, int | float | Decimal)
        if isinstance(value, float | Decimal) and not math.isfinite(value):
            raise DomainError(f"{_shown(value)} is not a finite number")
        if not INT64_MIN <= value <= INT64_MAX:
            raise DomainError(f"{_shown(value)} is outside int64")
        if value != int(value):
            raise DomainError(f"{_shown(value)} is not an integer")
        return int(value)

    def value(self, key: Key) -> int:
        assert isinstance(key, int)
        return key

    def literal(self, key: Key) -> str:
        return str(key)


_SIGN = 1 << 63


def float_key(x: float) -> int:
    """An int64 that orders as the double ``x`` does (``-0.0`` maps to ``0.0``'s key)."""
    if x == 0.0:
        x = 0.0
    bits = struct.unpack("<q", struct.pack("<d", x))[0]
    # negative doubles: flip the magnitude bits so more negative sorts lower
    return bits if bits >= 0 else -(bits & (_SIGN - 1)) - 1


def key_float(key: int) -> float:
    """The inverse of :func:`float_key`."""
    bits = key if key >= 0 else (-(key + 1)) | _SIGN
    if bits >= _SIGN:
        bits -= 1 << 64
    return float(struct.unpack("<d", struct.pack("<q", bits))[0])


_MAX_FLOAT_KEY = float_key(1.7976931348623157e308)
_MIN_FLOAT_KEY = float_key(-1.7976931348623157e308)


@dataclass(frozen=True, slots=True)
class FloatDomain:
    """Every finite IEEE double (``float`` in a schema)."""

    @property
    def ordered(self) -> bool:
        return True

    @property
    def spec(self) -> str:
        return "float"

    @property
    def min_key(self) -> int:
        return _MIN_FLOAT_KEY

    @property
    def max_key(self) -> int:
        return _MAX_FLOAT_KEY

    @property
    def size(self) -> int:
        return self.max_key - self.min_key + 1

    def key(self, value: object) -> int:
        if not _is_number(value):
            raise DomainError(f"{_shown(value)} is not a number")
        try:
            x = float(value)  # type: ignore[arg-type]
        except OverflowError:
            raise DomainError(f"{_shown(value)} is outside the doubles") from None
        if not math.isfinite(x):
            raise DomainError(f"{_shown(value)} is not a finite double")
        return float_key(x)

    def value(self, key: Key) -> float:
        assert isinstance(key, int)
        return key_float(key)

    def literal(self, key: Key) -> str:
        text = repr(self.value(key))
        # the profile language has no exponents: 1e-05 is written 0.00001
        return text if "e" not in text else format(Decimal(text), "f")


@dataclass(frozen=True, slots=True)
class BoolDomain:
    """``false`` < ``true``."""

    @property
    def ordered(self) -> bool:
        return True

    @property
    def spec(self) -> str:
        return "bool"

    @property
    def min_key(self) -> int:
        return 0

    @property
    def max_key(self) -> int:
        return 1

    @property
    def size(self) -> int:
        return self.max_key - self.min_key + 1

    def key(self, value: object) -> int:
        if isinstance(value, bool):
            return int(value)
        if value in ("true", "false"):  # the profile language's bare words
            return int(value == "true")
        raise DomainError(f"{_shown(value)} is not a boolean (true or false)")

    def value(self, key: Key) -> bool:
        return bool(key)

    def literal(self, key: Key) -> str:
        return "true" if key else "false"


_RFC3339 = re.compile(r"(\d{4})-(\d{2})-(\d{2})[Tt ](\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,9}))?"
                      r"(?:([Zz])|([+-])(\d{2}):(\d{2}))")
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_NS = 10**9


@dataclass(frozen=True, slots=True)
class TimestampDomain:
    """RFC 3339 instants (years 0001-9999), keyed by nanoseconds since 1970 UTC."""

    @property
    def ordered(self) -> bool:
        return True

    @property
    def spec(self) -> str:
        return "timestamp"

    @property
    def min_key(self) -> int:
        return self.key("0001-01-01T00:00:00Z")

    @property
    def max_key(self) -> int:
        return self.key("9999-12-31T23:59:59.999999999Z")

    @property
    def size(self) -> int:
        return self.max_key - self.min_key + 1

    def key(self, value: object) -> int:
        m = _RFC3339.fullmatch(value) if isinstance(value, str) else None
        if m is None:
            raise DomainError(f"{_shown(value)} is not an RFC 3339 timestamp such as "
                              "\"2024-05-01T12:00:00Z\" (at most 9 fraction digits)")
        try:
            offset = timedelta(0) if m[8] else timedelta(hours=int(m[10]), minutes=int(m[11]))
            if m[9] == "-":
                offset = -offset
            at = datetime(int(m[1]), int(m[2]), int(m[3]), int(m[4]), int(m[5]), int(m[6]),
                          tzinfo=timezone(offset))
        except ValueError as exc:
            raise DomainError(f"{_shown(value)} is not a valid timestamp: {exc}") from None
        delta = at - _EPOCH
        nanos = int((m[7] or "0").ljust(9, "0"))
        return (delta.days * 86400 + delta.seconds) * _NS + nanos

    def value(self, key: Key) -> str:
        assert isinstance(key, int)
        secs, nanos = divmod(key, _NS)
        at = _EPOCH + timedelta(seconds=secs)
        text = at.strftime("%Y-%m-%dT%H:%M:%S").rjust(19, "0")
        if nanos:
            text += "." + f"{nanos:09d}".rstrip("0")
        return text + "Z"

    def literal(self, key: Key) -> str:
        return quote_string(self.value(key))


_V4_BASE = 0xFFFF << 32
IP_MAX = (1 << 128) - 1


def ip_key(text: str) -> int:
    """The 128-bit key of an address (IPv4 mapped into ``::ffff:0:0/96``)."""
    addr = ipaddress.ip_address(text)
    return _V4_BASE + int(addr) if addr.version == 4 else int(addr)


def cidr_interval(text: object) -> tuple[int, int]:
    """The first and last key of a ``cidr`` block; raises :class:`ProfileError`."""
    if not isinstance(text, str):
        raise ProfileError(f"cidr takes a quoted block such as \"10.0.0.0/8\", not {text!r}")
    try:
        net = ipaddress.ip_network(text, strict=False)
    except ValueError as exc:
        raise ProfileError(f"{_shown(text)} is not a CIDR block: {exc}") from None
    base = _V4_BASE if net.version == 4 else 0
    return base + int(net.network_address), base + int(net.broadcast_address)


@dataclass(frozen=True, slots=True)
class IpDomain:
    """IPv4 and IPv6 addresses, written as text (``"10.1.2.3"``, ``"2001:db8::1"``)."""

    @property
    def ordered(self) -> bool:
        return True

    @property
    def spec(self) -> str:
        return "ip"

    @property
    def min_key(self) -> int:
        return 0

    @property
    def max_key(self) -> int:
        return IP_MAX

    @property
    def size(self) -> int:
        return self.max_key - self.min_key + 1

    def key(self, value: object) -> int:
        if not isinstance(value, str):
            raise DomainError(f"{_shown(value)} is not an IP address")
        try:
            return ip_key(value)
        except ValueError:
            raise DomainError(f"{_shown(value)} is not an IP address") from None

    def value(self, key: Key) -> str:
        assert isinstance(key, int)
        if key >> 32 == 0xFFFF:
            return str(ipaddress.IPv4Address(key - _V4_BASE))
        return str(ipaddress.IPv6Address(key))

    def literal(self, key: Key) -> str:
        return quote_string(self.value(key))


OpenDomain = Int64Domain | FloatDomain | BoolDomain | TimestampDomain | IpDomain

OPEN_KINDS: dict[str, OpenDomain] = {
    "int": Int64Domain(), "float": FloatDomain(), "bool": BoolDomain(),
    "timestamp": TimestampDomain(), "ip": IpDomain(),
}
"""The open kinds by their schema spelling."""
