"""Workloads generated in Spark, seeded: the standard workload and a building's day.

* :func:`standard_events`: keyed events of the standard workload of ``bench/workload.py``
  (types ``S0..`` with ``i0..i9`` int[0,999] and ``e0, e1`` enum[A..E]; uniform keys),
  generated on the executors, so any size fits.
* :func:`building_day`: a day of building-automation events for the schema in
  ``examples/building/schema.toml`` (Bittner's use case): periodic temperature,
  brightness, sun and lamp reports, change-driven motion, window and button events, and a
  few real alarms (glass breaking, lamps failing) among many harmless reports. Values
  follow the time of day (a warm afternoon outside, occupied offices from 8 to 18). Two
  incidents for the composite profiles of ``examples/building/composites.txt``: every
  real glass break is followed by an intruder's motion in its room 10-50 s later, and
  every room's heater switches on in the morning and off in the evening, but in
  ``heater_faults`` rooms it is broken (the room stays at 16 degrees all day).

Both are deterministic for a given seed and partition count.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from siftbus.errors import SchemaError
from siftbus.model import Schema
from siftbus.spark.sinks import write_one_file

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession

ROOMS = 300
"""Rooms of the building (basement and eight floors of thirty)."""
ENUM_LABELS = ("A", "B", "C", "D", "E")
DOMAIN = 1000


def standard_schema_toml(n_types: int = 1) -> str:
    """The standard workload's schema (the same as ``bench/workload.standard_schema``)."""
    lines: list[str] = []
    for t in range(n_types):
        lines.append(f"[S{t}]")
        lines += [f'i{j} = "int[0,{DOMAIN - 1}]"' for j in range(10)]
        lines += [f'e{j} = "enum[{",".join(ENUM_LABELS)}]"' for j in range(2)]
    return "\n".join(lines) + "\n"


def standard_events(spark: SparkSession, n: int, *, seed: int = 2, partitions: int = 4,
                    n_types: int = 1) -> DataFrame:
    """``n`` keyed events (``source, event, type, ikeys, skeys``), uniform keys."""
    from pyspark.sql import functions as F

    df = spark.range(0, n, numPartitions=partitions)
    ikeys = [F.floor(F.rand(seed * 100 + j) * DOMAIN).cast("long") for j in range(10)]
    ikeys += [F.floor(F.rand(seed * 100 + 10 + j) * len(ENUM_LABELS)).cast("long")
              for j in range(2)]
    tname = (F.lit("S0") if n_types == 1
             else F.concat(F.lit("S"), (F.col("id") % n_types).cast("string")))
    return df.select(
        F.lit("standard").alias("source"), F.col("id").alias("event"), tname.alias("type"),
        F.array(*ikeys).alias("ikeys"), F.array().cast("array<string>").alias("skeys"))


@dataclass(frozen=True, slots=True)
class BuildingDay:
    """How much a building produces in a day (per source: count and reporting period)."""

    temperature_sensors: int = 300
    temperature_period: int = 300
    brightness_sensors: int = 300
    brightness_period: int = 300
    motion_events: int = 30_000
    window_events: int = 3_000
    button_events: int = 12_000
    lamps: int = 2000
    lamp_period: int = 3600
    glass_sensors: int = 400
    glass_period: int = 1800
    glass_breaks: int = 3
    """Real alarms: glass-break reports with a high level, at random times."""
    outdoor_period: int = 60
    sun_period: int = 60
    heater_faults: int = 2
    """Rooms whose heater is broken (always cold; a seeded choice)."""

    def scaled(self, factor: float) -> BuildingDay:
        """More (or fewer) events of every kind, by ``factor``."""
        def s(v: int) -> int:
            return max(1, int(v * factor))

        def p(v: int) -> int:  # every periodic source reports at least once a day
            return min(86_400, max(1, int(v / factor)))

        return BuildingDay(self.temperature_sensors, p(self.temperature_period),
                           self.brightness_sensors, p(self.brightness_period),
                           s(self.motion_events), s(self.window_events), s(self.button_events),
                           self.lamps, p(self.lamp_period), self.glass_sensors,
                           p(self.glass_period), self.glass_breaks, p(self.outdoor_period),
                           p(self.sun_period), self.heater_faults)

    def expected_events(self) -> int:
        day = 86_400
        return (self.temperature_sensors * (day // self.temperature_period)
                + self.brightness_sensors * (day // self.brightness_period)
                + self.motion_events + self.window_events + self.button_events
                + self.lamps * (day // self.lamp_period)
                + self.glass_sensors * (day // self.glass_period) + 2 * self.glass_breaks
                + 2 * ROOMS
                + 4 * (day // self.outdoor_period) + 4 * (day // self.sun_period))


_BUILDING_TYPES = ("Temperature", "Brightness", "Motion", "GlassBreak", "WindowContact",
                   "LampStatus", "Button", "Sun", "OutdoorTemp", "Heater")


def faulty_heater_rooms(seed: int, day: BuildingDay | None = None) -> list[int]:
    """The rooms whose heater is broken in the day of ``seed`` (a bijection of the rooms,
    so exactly ``heater_faults`` of them)."""
    n = (day or BuildingDay()).heater_faults
    return sorted(r for r in range(1, ROOMS + 1) if (r * 7919 + seed) % ROOMS < n)


def _check_building_schema(schema: Schema) -> None:
    missing = [t for t in _BUILDING_TYPES if t not in schema]
    if missing:
        raise SchemaError(f"the building workload needs the types {', '.join(missing)} "
                          "(see examples/building/schema.toml)")


def building_day(spark: SparkSession, schema: Schema, *, seed: int = 42,
                 day: BuildingDay | None = None, partitions: int = 4) -> DataFrame:
    """A day of building events as ``t, text`` (seconds since midnight, JSON line)."""
    from pyspark.sql import functions as F

    _check_building_schema(schema)
    d = day or BuildingDay()
    two_pi = 2 * math.pi

    def rnd(k: int) -> Column:
        return F.rand(seed * 1000 + k)

    def periodic(n_sources: int, period: int) -> DataFrame:
        per = 86_400 // period
        return spark.range(0, n_sources * per, numPartitions=partitions).select(
            (F.col("id") % n_sources + 1).alias("src"),
            ((F.col("id") / n_sources).cast("long") * period
             + (F.col("id") % n_sources) * period / n_sources).cast("long").alias("t"))

    def sporadic(n: int, k: int) -> DataFrame:
        return spark.range(0, n, numPartitions=partitions).select(
            F.col("id").alias("src"), F.floor(rnd(k) * 86_400).cast("long").alias("t"))

    def room_of(src: Column) -> Column:
        return ((src - 1) % 300 + 1).cast("long")

    def phase(t: Column, shift_hours: float) -> Column:
        return F.sin(F.lit(two_pi) * (t / 86_400.0 - shift_hours / 24.0))

    def clamp(c: Column, lo: float, hi: float) -> Column:
        return F.least(F.greatest(c, F.lit(lo)), F.lit(hi))

    def office_hours(t: Column) -> Column:
        return (t >= 8 * 3600) & (t < 18 * 3600)

    def j(tname: str, *fields: tuple[str, Column]) -> Column:
        return F.to_json(F.struct(F.lit(tname).alias("type"),
                                  *[c.alias(name) for name, c in fields])).alias("text")

    parts: list[DataFrame] = []
    t = F.col("t")
    src = F.col("src")
    temp = periodic(d.temperature_sensors, d.temperature_period)
    # Indoor: 20.5 at night, up to 23.5 in the afternoon, each room a little different;
    # a room with a broken heater stays at 16.
    broken = ((room_of(src) * 7919 + seed) % ROOMS) < d.heater_faults
    indoor = F.when(broken, F.lit(16.0) + F.randn(seed + 1) * 0.4).otherwise(
        F.lit(22.0) + 1.5 * phase(t, 9) + (src % 7 - 3) * 0.3 + F.randn(seed + 1) * 0.4)
    parts.append(temp.select(t, j("Temperature", ("sensor", src), ("room", room_of(src)),
                                  ("value", F.round(clamp(indoor, -40, 60), 1)))))
    outdoor = periodic(4, d.outdoor_period)
    outside = F.lit(13.0) + 9.0 * phase(t, 9) + F.randn(seed + 2) * 0.8
    parts.append(outdoor.select(t, j("OutdoorTemp", ("sensor", src),
                                     ("value", F.round(clamp(outside, -40, 60), 1)))))
    bright = periodic(d.brightness_sensors, d.brightness_period)
    daylight = F.greatest(F.lit(0.0), phase(t, 6))
    lux = F.when(office_hours(t) & (rnd(3) < 0.7), 400 + rnd(4) * 300).otherwise(0.0) + \
        daylight * (200 + rnd(5) * 2000)
    parts.append(bright.select(t, j("Brightness", ("sensor", src), ("room", room_of(src)),
                                    ("lux", clamp(lux, 0, 100_000).cast("long")))))
    motion = sporadic(d.motion_events, 6)
    present = F.when(office_hours(t), rnd(7) < 0.7).otherwise(rnd(7) < 0.03).cast("long")
    parts.append(motion.select(t, j("Motion", ("sensor", src % 400 + 1),
                                    ("room", room_of(src % 400 + 1)), ("present", present))))
    windows = sporadic(d.window_events, 8)
    parts.append(windows.select(t, j("WindowContact", ("room", room_of(src + 1)),
                                     ("open", (rnd(9) < 0.4).cast("long")))))
    buttons = sporadic(d.button_events, 10)
    action = F.element_at(F.array(F.lit("PRESS"), F.lit("HOLD"), F.lit("RELEASE")),
                          (F.floor(rnd(11) * 3) + 1).cast("int"))
    parts.append(buttons.select(t, j("Button", ("switch", src % 600 + 1),
                                     ("room", room_of(src % 600 + 1)), ("action", action))))
    lamps = periodic(d.lamps, d.lamp_period)
    u = rnd(12)
    state = F.when(u < 0.002, "FAILED").when(u < 0.012, "DEGRADED").otherwise("OK")
    parts.append(lamps.select(t, j("LampStatus", ("lamp", src), ("room", room_of(src)),
                                   ("state", state))))
    glass = periodic(d.glass_sensors, d.glass_period)
    zone = F.element_at(F.array(*[F.lit(z) for z in
                                  ("north-1", "north-2", "south", "east", "lobby", "entrance")]),
                        (src % 6 + 1).cast("int"))
    # Background noise: level 0-2 almost always; a real break is level 8-10.
    level = F.floor(rnd(13) * rnd(14) * 4).cast("long")
    parts.append(glass.select(t, j("GlassBreak", ("sensor", src), ("room", room_of(src)),
                                   ("zone", zone), ("level", level))))
    breaks = sporadic(d.glass_breaks, 15)
    parts.append(breaks.select(t, j("GlassBreak", ("sensor", src * 37 % 400 + 1),
                                    ("room", room_of(src * 37 % 400 + 1)),
                                    ("zone", F.lit("north-1")),
                                    ("level", (8 + F.floor(rnd(16) * 3)).cast("long")))))
    # The intruder: motion in the broken room 10-50 s after each real break.
    parts.append(breaks.select((t + 10 + F.floor(rnd(18) * 41)).cast("long").alias("t"),
                               j("Motion", ("sensor", src * 37 % 400 + 1),
                                 ("room", room_of(src * 37 % 400 + 1)),
                                 ("present", F.lit(1).cast("long")))))
    # Heaters: on between 5:30 and 6:30, off between 20:00 and 21:00, every room.
    heaters = spark.range(0, 2 * ROOMS, numPartitions=partitions).select(
        (F.col("id") % ROOMS + 1).alias("src"), (F.col("id") >= ROOMS).alias("off"))
    heaters = heaters.select(
        "src", "off", F.when(F.col("off"), 20 * 3600).otherwise(5 * 3600 + 1800)
        .cast("long").alias("base"))
    parts.append(heaters.select(
        (F.col("base") + F.floor(rnd(19) * 3600)).cast("long").alias("t"),
        j("Heater", ("room", src), ("on", (~F.col("off")).cast("long")))))
    sun = periodic(4, d.sun_period)
    facade = F.element_at(F.array(*[F.lit(f) for f in ("N", "E", "S", "W")]),
                          src.cast("int"))
    shift = F.element_at(F.array(*[F.lit(h) for h in (12.0, 3.0, 6.0, 9.0)]), src.cast("int"))
    irr = F.greatest(F.lit(0.0), F.sin(F.lit(two_pi) * (t / 86_400.0 - shift / 24.0))) \
        * F.when(src == 1, 300).otherwise(1100) + rnd(17) * 60
    parts.append(sun.select(t, j("Sun", ("facade", facade),
                                 ("irradiance", clamp(irr, 0, 1200).cast("long")))))
    out = parts[0]
    for p in parts[1:]:
        out = out.unionByName(p)
    return out.select("t", "text")


def write_day(df: DataFrame, path: str | Path) -> int:
    """Write a day's events as ONE JSON-lines file, in time order; returns the line count."""
    from pyspark.sql import functions as F

    ordered = df.orderBy(F.col("t"), F.col("text")).select("text").coalesce(1)
    return write_one_file(ordered, Path(path), "text")


__all__ = [
    "BuildingDay",
    "building_day",
    "faulty_heater_rooms",
    "standard_events",
    "standard_schema_toml",
    "write_day",
]
