"""Every event of a small finite event type, for checking rights against brute force."""

from __future__ import annotations

import itertools

from siftbus.model import Event, EventType, StringDomain
from strategies import STRINGS

# Strings the profiles never mention too, so "not in the right" has witnesses.
PROBE_STRINGS = [*STRINGS, "zz", "north-2", "abd", "s"]


def every_event(etype: EventType) -> list[Event]:
    values = []
    for a in etype.attributes:
        d = a.domain
        if isinstance(d, StringDomain):
            values.append(PROBE_STRINGS)
        else:
            values.append([d.value(k) for k in range(d.min_key, d.max_key + 1)])
    return [Event.of(etype, dict(zip(etype.names, combo, strict=True)))
            for combo in itertools.product(*values)]
