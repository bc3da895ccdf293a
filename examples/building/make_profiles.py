"""Writes profiles.txt: the subscriptions of the building's trades.

Real buildings repeat themselves: every radiator asks the same outdoor question, every
blind on a facade the same sun question, so the file is full of identical and covering
profiles, which is what covering-based routing exploits. Run from this folder:
``python make_profiles.py > profiles.txt``.
"""

import random

rng = random.Random(2003)
FLOORS = range(9)  # 0 = basement
lines: list[str] = []


def rooms(floor: int) -> range:
    return range(floor * 30 + 1, floor * 30 + 31)


lines.append("# heaters: shared outdoor sensor (identical), per-room thresholds (covering chains)")
for floor in FLOORS:
    for room in rooms(floor)[::3]:
        lines.append(f"heater-r{room}: OutdoorTemp(value > 20)")
        threshold = rng.choice(["21.0", "21.5", "22.0", "23.0"])
        lines.append(f"heater-r{room}-room@heater-r{room}: Temperature(room = {room}, "
                     f"value > {threshold})")
lines.append("heater-legacy-1: PROFILE(PRI(value>20,TYPE=OutdoorTemp))")
lines.append("heater-frost@facility: OutdoorTemp(value <= 2.0)")

lines.append("# blinds: one sun question per facade, some stricter (covered)")
for i in range(48):
    facade = "NESW"[i % 4]
    limit = 600 if i % 6 else 800
    lines.append(f"blind-{i + 1}: Sun(facade = {facade}, irradiance > {limit})")

lines.append("# lights: too dark in the room, or a button pressed")
for floor in FLOORS[1:]:
    for room in rooms(floor)[::2]:
        lines.append(f"light-r{room}: Brightness(room = {room}, lux < 500)")
        lines.append(f"light-r{room}-button@light-r{room}: Button(room = {room}, action = PRESS)")

lines.append("# janitor: failed and degrading lamps, everywhere and per floor")
lines.append("janitor-failed@janitor: LampStatus(state = FAILED)")
lines.append("janitor-worn@janitor: LampStatus(state >= DEGRADED)")
for floor in FLOORS:
    lo, hi = floor * 30 + 1, floor * 30 + 30
    lines.append(f"janitor-floor{floor}@janitor-floor{floor}: "
                 f"LampStatus(room in [{lo}, {hi}], state = FAILED)")

lines.append("# security: glass breaking, motion in the basement")
lines.append("security-glass@security: GlassBreak(level > 5)")
lines.append('security-glass-north@security: GlassBreak(zone prefix "north", level >= 3)')
lines.append('security-lobby@security: GlassBreak(zone in {"lobby", "entrance"})')
lines.append("security-basement@security: Motion(room in [1, 30], present = 1)")
lines.append("security-archive@security: Motion(room in {7, 8}, present = 1)")

lines.append("# HVAC: open windows (one profile per room, and one that covers them all)")
lines.append("hvac-all@hvac: WindowContact(open = 1)")
for floor in FLOORS[1:]:
    for room in rooms(floor)[::5]:
        lines.append(f"hvac-r{room}@hvac: WindowContact(room = {room}, open = 1)")
lines.append("hvac-hot@hvac: Temperature(value in [28.0, MAX])")
lines.append("hvac-cold@hvac: Temperature(value < 16, room != 1)")

print("\n".join(lines))
