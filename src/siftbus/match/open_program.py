"""The open index as flat arrays for the compiled kernel (:mod:`siftbus.match.open_numba`).

:func:`compile_program` turns the tables of an :class:`~siftbus.match.open_index.
OpenIndexMatcher` into one ``int64`` array and one ``uint8`` array (few arguments: a
numba call unboxes each array it is given, and a per-event call must stay cheap). Sections
of the ``int64`` array, found through its header (``prog[k]:prog[k+1]`` is section ``k``):

``TYPES``    per compiled type: name (offset, length in bytes), fields, lazy access
             list, always list (pool ranges)
``FIELDS``   per field: JSON key (offset, length), flags (1 optional, 2 array), the
             negated ("all except"), present and absent condition lists (pool ranges),
             its number (hashed tables are numbered ``6 * field + table``) and
             two bits per table: it holds keys of satisfied / of failed conditions
``LENS``     per prefix/suffix table: the key lengths it holds, ascending
``HASH``     open addressing, one cache line per slot: table (``-1`` empty), key length,
             its conditions (pool range), key offset, the key's first 16 bytes as two
             little-endian words (a lookup touches one line, and the bytes only
             for longer keys)
``ENT``      (empty: the entries live in their slots)
``ACC``      per condition: the groups of alternatives it gives access to (pool range
             of records ``n_need, n_lazy, n_profiles, multi, need..., lazy...,
             profiles...``: alternatives with the same other conditions are one record,
             checked once, their profiles emitted together; ``multi`` when a profile of
             the record has other alternatives, so the kernel must not emit it twice)
``ALT``      per alternative: its profile's dense index, needed and lazy conditions
             (the lazy-led and always ones)
``LAZY``     per condition: field (its position in the type), negated, wildcard
             pieces (``PARTS`` range)
``PARTS``    wildcard pieces as (offset, length) in the bytes
``POOL``     the lists the other sections point into
``META``     number of conditions, of profiles, hash mask

Only event types the kernel reads exactly are compiled: flat attributes of ``string``
kind (optional and arrays allowed), conditions of the hashed, negated, present and absent
kinds, and lazy ``like``/``contains``. A type with anything else (open numeric kinds,
nested paths, ``matches``, string ranges with holes) is left out, and its events take the
Python path: :mod:`siftbus.match.open_index` over the specification's parser.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from siftbus.match.open_fields import (
    ABSENT,
    EQ,
    GENERIC,
    HASHED,
    LAZY,
    NEGATED,
    PRESENT,
    SUFFIXI,
)
from siftbus.model.checks import wildcard_parts
from siftbus.model.domain import StringDomain
from siftbus.model.schema import EventType

if TYPE_CHECKING:
    from siftbus.match.open_index import Alternative, OpenIndexMatcher, TypeIndex

(TYPES, FIELDS, LENS_OFF, LENS, HASH, ENT, ACC, ALT, LAZYS, PARTS, POOL, META) = range(12)
N_SECTIONS = 12
TYPE_W, FIELD_W, SLOT_W, ALT_W, LAZY_W = 8, 11, 8, 5, 4
GROUP_HEAD = 4
N_TABLES = 6


HASH_SEED, HASH_MUL, HASH_MIX = 14695981039346656037, 1099511628211, 0xFF51AFD7ED558CCD
_M64 = (1 << 64) - 1


def key_hash(data: bytes, salt: int) -> int:
    """The hash of a table key, seeded by the table number: its 8-byte little-endian words
    (the last one zero-padded) folded in by multiplication, then its length, then a final
    mix so the low bits (the slot) depend on every byte. The kernel computes the same
    over the event's bytes, a word at a time rather than a multiplication per byte."""
    h = (HASH_SEED ^ salt) & _M64
    for o in range(0, len(data), 8):
        h = ((h ^ int.from_bytes(data[o:o + 8], "little")) * HASH_MUL) & _M64
    h ^= len(data)
    h ^= h >> 33
    h = (h * HASH_MIX) & _M64
    return h ^ (h >> 33)


def compilable(etype: EventType, t: TypeIndex) -> bool:
    """Whether the kernel reads this type's events and answers its conditions exactly
    (an extended type's profiles are all in the open index; others are not)."""
    for a in etype.attributes:
        if (not isinstance(a.domain, StringDomain) or "." in a.name or not a.name.isascii()
                or a.name == "type"):
            return False
    for c in t.conds.values():
        if c.where.kind == GENERIC:
            return False
        if c.where.kind == LAZY and c.check.op not in ("like", "contains"):
            return False
    return True


@dataclass(frozen=True, slots=True)
class OpenProgram:
    """The compiled open index at one matcher version."""

    version: int
    prog: np.ndarray
    """int64 sections (see the module text)."""
    pbytes: np.ndarray
    """uint8: type names, field keys, table keys, wildcard pieces."""
    profile_ids: np.ndarray
    """Dense index -> profile id, in id order (a row sorted by index is sorted by id)."""
    types: frozenset[str]
    """The event types compiled; events of other types take the Python path."""
    n_cids: int
    n_profiles: int
    n_fields: int


class _Builder:
    def __init__(self) -> None:
        self.pool: list[int] = []
        self.data = bytearray()

    def lst(self, items: list[int]) -> tuple[int, int]:
        lo = len(self.pool)
        self.pool.extend(items)
        return lo, len(self.pool)

    def text(self, b: bytes) -> tuple[int, int]:
        lo = len(self.data)
        self.data += b
        return lo, len(b)


def compile_program(m: OpenIndexMatcher) -> OpenProgram:
    """The kernel's arrays for every compilable type of ``m`` (see the module text)."""
    ids = sorted(p.id for p in m.profiles())
    dense = {pid: i for i, pid in enumerate(ids)}
    # a profile of one alternative keeps it as itself, not in a tuple (open_index)
    n_alts = {dense[pid]: len(filed) if isinstance(filed, tuple) else 1
              for pid, filed in m._alts.items()}
    b = _Builder()
    types: list[int] = []
    fields: list[int] = []
    lens_off: list[int] = [0]
    lens: list[int] = []
    entries: list[tuple[int, bytes, tuple[int, int]]] = []
    acc: dict[int, tuple[int, int]] = {}
    alts: list[int] = []
    lazys: dict[int, tuple[int, int, int, int]] = {}
    parts: list[int] = []
    compiled: list[str] = []
    base = 0  # conditions of each type are numbered from base
    n_fields = 0
    for name, t in sorted(m._types.items()):
        etype = m.etype_of(name)
        if etype is None or not etype.extended or not compilable(etype, t):
            continue
        compiled.append(name)
        span = max(t.conds, default=-1) + 1
        field_of: dict[int, int] = {}
        f_lo = n_fields
        for attr in etype.attributes:
            ft = t.fields.get(attr.position)
            fid = n_fields
            n_fields += 1
            field_of[attr.position] = fid
            koff, klen = b.text(attr.name.encode())
            if ft is None:
                neg, pres, absn = (0, 0), (0, 0), (0, 0)
                tables_pos: list[dict[object, set[int]]] = [{}] * N_TABLES
                tables_neg: list[dict[object, set[int]]] = [{}] * N_TABLES
            else:
                neg = b.lst(sorted(base + c for c in ft.neg_all))
                pres = b.lst(sorted(base + c for c in ft.present))
                absn = b.lst(sorted(base + c for c in ft.absent))
                tables_pos, tables_neg = ft.pos, ft.neg
            flags = (1 if attr.optional else 0) | (2 if attr.array else 0)
            mask = sum((1 << 2 * tab if tables_pos[tab] else 0)
                       | (2 << 2 * tab if tables_neg[tab] else 0) for tab in range(N_TABLES))
            fields.extend([koff, klen, flags, *neg, *pres, *absn, fid, mask])
            for tab in range(N_TABLES):
                tid = fid * N_TABLES + tab
                got = sorted({len(str(k).encode()) for k in tables_pos[tab]}
                             | {len(str(k).encode()) for k in tables_neg[tab]})
                lens.extend(got if tab != EQ else [])
                lens_off.append(len(lens))
                for side, tables in ((0, tables_pos), (1, tables_neg)):
                    for key, cids in tables[tab].items():
                        entries.append((2 * tid + side, str(key).encode(),
                                        b.lst(sorted(base + c for c in cids))))
        lazy_acc: list[int] = []
        for cid, c in t.conds.items():
            if c.where.kind == LAZY:
                pieces = (("", str(c.check.operand), "") if c.check.op == "contains"
                          else wildcard_parts(str(c.check.operand)))
                plo = len(parts) // 2
                for piece in pieces:
                    parts.extend(b.text(piece.encode()))
                lazys[base + cid] = (c.check.position, int(c.check.negated), plo,
                                     len(parts) // 2)
        index: dict[int, int] = {}

        def alt_no(alt_id: int, alt: Alternative, base: int = base,
                   index: dict[int, int] = index) -> int:
            got = index.get(alt_id)
            if got is None:
                got = index[alt_id] = len(alts) // ALT_W
                need = b.lst(sorted(base + c for c in alt.need))
                lz = b.lst([base + c for c in alt.lazy])
                alts.extend([dense[alt.profile], *need, *lz])
            return got

        for cid, group in t.access.items():
            acc[base + cid] = b.lst(_records(cid, base, group, dense, n_alts))
        for cid, group in t.lazy_access.items():
            lazy_acc.extend([base + cid, *b.lst([alt_no(i, a) for i, a in group.items()])])
        la = b.lst(lazy_acc)
        al = b.lst([alt_no(i, a) for i, a in t.always.items()])
        noff, nlen = b.text(name.encode())
        types.extend([noff, nlen, f_lo, n_fields, *la, *al])
        base += span
    n_cids = base
    size = 1 << max(4, (3 * len(entries) // 2).bit_length())
    slots = np.full(SLOT_W * size, 0, np.int64)
    slots[::SLOT_W] = -1
    for tid, key, (plo, phi) in entries:
        h = key_hash(key, tid) & (size - 1)
        while slots[SLOT_W * h] >= 0:
            h = (h + 1) & (size - 1)
        koff, klen = b.text(key)
        slots[SLOT_W * h:SLOT_W * h + 7] = [tid, klen, plo, phi, koff, _word(key[:8]),
                                            _word(key[8:16])]
    acc_flat: list[int] = []
    for cid in range(n_cids):
        acc_flat.extend(acc.get(cid, (0, 0)))
    lazy_flat: list[int] = []
    for cid in range(n_cids):
        lazy_flat.extend(lazys.get(cid, (0, 0, 0, 0)))
    sections = [np.array(types, np.int64), np.array(fields, np.int64),
                np.array(lens_off, np.int64), np.array(lens, np.int64), slots,
                np.zeros(0, np.int64), np.array(acc_flat, np.int64),
                np.array(alts, np.int64), np.array(lazy_flat, np.int64),
                np.array(parts, np.int64), np.array(b.pool, np.int64),
                np.array([n_cids, len(ids), size - 1], np.int64)]
    prog = _lay_out(sections)
    from siftbus.match.columns import str_array

    pbytes = np.frombuffer(bytes(b.data) or b"\0", np.uint8).copy()
    assert SUFFIXI == N_TABLES - 1 and {HASHED, NEGATED, PRESENT, ABSENT}
    return OpenProgram(m.version, prog, pbytes, str_array(ids), frozenset(compiled),
                       n_cids, len(ids), n_fields)


def _word(key: bytes) -> int:
    """Up to 8 bytes as the little-endian int64 the kernel builds while it hashes."""
    w = int.from_bytes(key.ljust(8, b"\0"), "little")
    return w - (1 << 64) if w >= 1 << 63 else w


def _records(cid: int, base: int, group: dict[int, Alternative], dense: dict[str, int],
             n_alts: dict[int, int]) -> list[int]:
    """The access records of condition ``cid`` (see ``ACC`` in the module text): its
    alternatives grouped by their other conditions."""
    buckets: dict[tuple[tuple[int, ...], tuple[int, ...]], list[int]] = {}
    for alt in group.values():
        key = (tuple(sorted(base + c for c in alt.need if c != cid)),
               tuple(sorted(base + c for c in alt.lazy)))
        buckets.setdefault(key, []).append(dense[alt.profile])
    out: list[int] = []
    for (need, lazy), profs in buckets.items():
        multi = int(any(n_alts[p] > 1 for p in profs))
        out.extend([len(need), len(lazy), len(profs), multi, *need, *lazy, *sorted(profs)])
    return out


def _lay_out(sections: list[np.ndarray]) -> np.ndarray:
    """Header and sections in one array, the hash slots on cache-line boundaries."""
    header = np.zeros(N_SECTIONS + 1, np.int64)
    header[0] = N_SECTIONS + 1
    for k, s in enumerate(sections):
        if k == HASH:
            header[k] += -header[k] % SLOT_W
        header[k + 1] = header[k] + len(s)
    raw = np.zeros(int(header[-1]) + SLOT_W, np.int64)
    lead = (-raw.ctypes.data // 8) % SLOT_W  # the array itself on a 64-byte boundary
    prog = raw[lead:lead + int(header[-1])]
    prog[:N_SECTIONS + 1] = header
    for k, s in enumerate(sections):
        prog[header[k]:header[k] + len(s)] = s  # LENS may be followed by padding
    return prog
