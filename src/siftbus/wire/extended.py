"""Keys of extended events on the wire (codec only, no I/O).

An event of an extended type (optional, nested, array or open-kind attributes; see
:mod:`siftbus.model.shapes`) travels as one key list in schema order like every event,
each key in a msgpack form that keeps it exact:

* an absent attribute is ``nil`` (allowed only where the schema says ``optional``);
* an array attribute is a non-empty msgpack array of its element keys;
* an ordered key within int64 (``int``, ``float`` as its ordered int64, ``bool`` as
  0/1, enums, decimals, most timestamps) is a msgpack integer; a key beyond int64 (an
  ``ip`` above 2**63, a timestamp before 1677 or after 2262 in nanoseconds) is msgpack
  ``bin``: the key as signed big-endian bytes;
* a string key is a msgpack string.

Nested attributes need nothing more: a dotted path is one attribute of the type. A
decoder checks every key against its attribute (shape and domain) and names the
attribute of the first bad one.
"""

from __future__ import annotations

from typing import Any

from siftbus.errors import WireError
from siftbus.model import Attribute, EventType, StringDomain

_I64_MIN, _I64_MAX = -(1 << 63), (1 << 63) - 1
MAX_BIG_KEY = 17
"""Most bytes of a key beyond int64 (an ip's 128 bits with the sign)."""


def wide_int(k: Any) -> Any:
    """``k``, or as signed big-endian bytes when it is an integer beyond int64 (what
    msgpack cannot carry); other keys unchanged."""
    if type(k) is int and not _I64_MIN <= k <= _I64_MAX:
        return k.to_bytes((k.bit_length() + 8) // 8, "big", signed=True)
    return k


def int_of(v: Any) -> int | None:
    """The integer an ordered key or bound was sent as (see :func:`wide_int`), else
    ``None``."""
    if type(v) is int:
        return v
    if type(v) is bytes and 0 < len(v) <= MAX_BIG_KEY:
        return int.from_bytes(v, "big", signed=True)
    return None


_scalar = wide_int


def encode_keys(keys: tuple[Any, ...]) -> list[Any]:
    """The wire form of an extended event's keys."""
    out: list[Any] = []
    for k in keys:
        if type(k) is tuple:
            out.append([_scalar(x) for x in k])
        else:
            out.append(_scalar(k))
    return out


def _key(etype: EventType, attr: Attribute, k: Any) -> Any:
    dom = attr.domain
    if isinstance(dom, StringDomain):
        if type(k) is not str:
            raise WireError(f"{etype.name}.{attr.name} must be a string", field=attr.name)
        return k
    key = int_of(k)
    if key is None or not dom.min_key <= key <= dom.max_key:
        raise WireError(f"{etype.name}.{attr.name}: key {str(k)[:40]} is outside "
                        f"{dom.spec}", field=attr.name)
    return key


def decode_keys(etype: EventType, keys: Any) -> tuple[Any, ...]:
    """Check and build an extended event's keys; raises :class:`WireError` naming the
    attribute."""
    attrs = etype.attributes
    if not isinstance(keys, list | tuple) or len(keys) != len(attrs):
        raise WireError(f"{etype.name} event needs {len(attrs)} keys")
    out: list[Any] = []
    for attr, k in zip(attrs, keys, strict=True):
        if k is None:
            if not attr.optional:
                raise WireError(f"{etype.name}.{attr.name} is required, not absent",
                                field=attr.name)
            out.append(None)
        elif attr.array:
            if not isinstance(k, list | tuple) or not k:
                raise WireError(f"{etype.name}.{attr.name} must be a non-empty array",
                                field=attr.name)
            out.append(tuple(_key(etype, attr, x) for x in k))
        else:
            out.append(_key(etype, attr, k))
    return tuple(out)
