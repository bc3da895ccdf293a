"""MQTT in -> MQTT out: events/s through ``siftbus mqtt-bridge`` beside mosquitto alone with
client-side filtering, in the same run (issue 34).

Both runs carry the same building workload (``workload.building_events``: sensor reports,
switches, lamps, alarms) published with QoS 1 by one paho-mqtt client to
``building/{Type}``:

* **siftbus**: mosquitto -> ``siftbus mqtt-bridge`` -> ``siftbus broker`` (matching) ->
  bridge -> mosquitto -> one paho subscriber on ``siftbus/notify/#`` (QoS 1). The profiles
  (``workload.building_profiles``, spread over their subscribers) are registered by
  retained control messages; the run ends when every predicted notification arrived.
* **mosquitto + client filter**: mosquitto -> one paho subscriber on ``building/#``
  (QoS 1) that parses every event and matches it against the same profiles with
  siftbus's index matcher (what an MQTT-only system must do); the run ends when every
  event arrived.

events/s = events / (last arrival - first publication). Each process's CPU seconds are
read from /proc. Run: ``python bench/mqtt.py [--quick] [--repeats N]``; writes
``bench/results/mqtt.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import paho.mqtt.client as paho
from paho.mqtt.enums import CallbackAPIVersion

sys.path.insert(0, str(Path(__file__).resolve().parent))
from network import free_port, process_cpu
from siftbus.lang.profile import format_profile
from siftbus.match.engines import make_matcher
from siftbus.model import event_from_dict, parse_schema
from workload import BUILDING_SCHEMA, building_events, building_profiles

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results"


def wait_port(port: int, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while True:
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        if time.monotonic() > deadline:
            raise SystemExit(f"nothing listens on {port} after {timeout} s")
        time.sleep(0.05)


def start_mosquitto(tmp: Path) -> tuple[subprocess.Popen[bytes], int]:
    binary = shutil.which("mosquitto") or "/usr/sbin/mosquitto"
    if not Path(binary).exists():
        raise SystemExit("mosquitto is not installed: make bench-sysdeps")
    port = free_port()
    conf = tmp / f"mosquitto-{port}.conf"
    conf.write_text(f"listener {port} 127.0.0.1\nallow_anonymous true\n"
                    "max_inflight_messages 1000\nmax_queued_messages 0\n")
    proc = subprocess.Popen([binary, "-c", str(conf)], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    wait_port(port)
    return proc, port


def stop(proc: subprocess.Popen[Any], sig: int = 2) -> None:
    if proc.poll() is None:
        proc.send_signal(sig)
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


class Counter:
    """A paho subscriber counting messages (optionally matching them client-side)."""

    def __init__(self, port: int, topic: str, expect: int, on_payload: Any = None) -> None:
        self.expect, self.on_payload = expect, on_payload
        self.got = 0
        self.last = 0.0
        self.done = threading.Event()
        self.ready = threading.Event()
        c = paho.Client(CallbackAPIVersion.VERSION2, client_id=f"bench-sub-{port}")
        c.on_connect = lambda c, u, f, rc, p: c.subscribe(topic, qos=1)
        c.on_subscribe = lambda *a: self.ready.set()
        c.on_message = self._message
        c.connect("127.0.0.1", port)
        c.loop_start()
        self.client = c

    def _message(self, _c: Any, _u: Any, msg: paho.MQTTMessage) -> None:
        if self.on_payload is not None:
            self.on_payload(msg.topic, msg.payload)
        self.got += 1
        if self.got >= self.expect:
            self.last = time.perf_counter()
            self.done.set()

    def close(self) -> None:
        self.client.disconnect()
        self.client.loop_stop()


def publish_all(port: int, messages: list[tuple[str, bytes]]) -> float:
    """Publish with QoS 1 from one client; returns the start time."""
    c = paho.Client(CallbackAPIVersion.VERSION2, client_id=f"bench-pub-{port}")
    c.max_inflight_messages_set(1000)
    c.connect("127.0.0.1", port)
    c.loop_start()
    t0 = time.perf_counter()
    infos = [c.publish(t, p, qos=1) for t, p in messages]
    for i in infos:
        i.wait_for_publish(120)
    c.disconnect()
    c.loop_stop()
    return t0


def mqtt_messages(events: list[Any]) -> list[tuple[str, bytes]]:
    out = []
    for e in events:
        obj = json.loads(e.to_json())
        out.append((f"building/{obj.pop('type')}", json.dumps(obj).encode()))
    return out


def predicted(profiles: list[Any], events: list[Any]) -> int:
    m = make_matcher("index")
    for p in profiles:
        m.add(p)
    return sum(len(r) for r in m.match_batch(events))


def run_siftbus(tmp: Path, profiles: list[Any], events: list[Any], expect: int,
                timeout: float) -> dict[str, Any]:
    schema = parse_schema(BUILDING_SCHEMA)
    (tmp / "schema.toml").write_text(BUILDING_SCHEMA)
    mq, port = start_mosquitto(tmp)
    bport = free_port()
    rules = "".join(f'[[mqtt.ingress]]\ntopic = "building/{t}"\ntype = "{t}"\n\n'
                    for t in schema.names)
    cfg = tmp / "net.toml"
    cfg.write_text(f'[network]\nschema = "schema.toml"\n\n[brokers.B1]\nport = {bport}\n\n'
                   f"{rules}")
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    broker = subprocess.Popen([sys.executable, "-m", "siftbus", "broker", "-c", str(cfg),
                               "-n", "B1"], stdout=subprocess.DEVNULL, env=env)
    wait_port(bport)
    reg = paho.Client(CallbackAPIVersion.VERSION2, client_id="bench-register")
    reg.connect("127.0.0.1", port)
    reg.loop_start()
    infos = [reg.publish(f"siftbus/control/{p.subscriber or 'anyone'}/p{i}",
                         format_profile(p, with_id=False).encode(), qos=1, retain=True)
             for i, p in enumerate(profiles)]
    for info in infos:
        info.wait_for_publish(30)
    reg.disconnect()
    reg.loop_stop()
    bridge = subprocess.Popen([sys.executable, "-m", "siftbus", "mqtt-bridge", "-c", str(cfg),
                               "-n", "B1", "--mqtt", f"127.0.0.1:{port}"],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              env=env)
    assert bridge.stdout is not None
    assert "mqtt bridge" in bridge.stdout.readline()
    sub = Counter(port, "siftbus/notify/#", expect)
    sub.ready.wait(10)
    cpu0 = {n: (process_cpu(p.pid) or 0.0) for n, p in
            (("broker", broker), ("bridge", bridge), ("mosquitto", mq))}
    t0 = publish_all(port, mqtt_messages(events))
    ok = sub.done.wait(timeout)
    cpu = {f"cpu_{n}_s": (process_cpu(p.pid) or 0.0) - cpu0[n] for n, p in
           (("broker", broker), ("bridge", bridge), ("mosquitto", mq))}
    sub.close()
    stop(bridge)
    stats = json.loads(bridge.stderr.read().strip().splitlines()[-1]) if bridge.stderr \
        else {}
    stop(broker)
    stop(mq, 15)
    elapsed = (sub.last if ok else time.perf_counter()) - t0
    return {"system": "siftbus mqtt-bridge", "events": len(events), "notifications": sub.got,
            "expected": expect, "complete": ok, "seconds": elapsed,
            "events_per_s": len(events) / elapsed, "bridge": stats, **cpu}


def run_mosquitto(tmp: Path, profiles: list[Any], events: list[Any], expect: int,
                  timeout: float) -> dict[str, Any]:
    schema = parse_schema(BUILDING_SCHEMA)
    m = make_matcher("index")
    for p in profiles:
        m.add(p)
    matched = [0]

    def match(topic: str, payload: bytes) -> None:  # the type is the topic's last level
        obj = {"type": topic.rpartition("/")[2], **json.loads(payload)}
        matched[0] += len(m.match(event_from_dict(obj, schema)))

    mq, port = start_mosquitto(tmp)
    msgs = mqtt_messages(events)
    sub = Counter(port, "building/#", len(events), match)
    sub.ready.wait(10)
    cpu0 = (process_cpu(mq.pid) or 0.0)
    c0 = time.process_time()
    t0 = publish_all(port, msgs)
    ok = sub.done.wait(timeout)
    cpu = (process_cpu(mq.pid) or 0.0) - cpu0
    proc_cpu = time.process_time() - c0
    sub.close()
    stop(mq, 15)
    elapsed = (sub.last if ok else time.perf_counter()) - t0
    return {"system": "mosquitto + client filter", "events": len(events),
            "notifications": matched[0], "expected": expect, "complete": ok,
            "seconds": elapsed, "events_per_s": len(events) / elapsed,
            "cpu_mosquitto_s": cpu, "cpu_bench_process_s": proc_cpu}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="5,000 events, 200 profiles")
    ap.add_argument("--events", type=int, default=None)
    ap.add_argument("--profiles", type=int, default=None)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--timeout", type=float, default=120.0)
    args = ap.parse_args()
    n_events = args.events or (5000 if args.quick else 20000)
    n_profiles = args.profiles or (200 if args.quick else 1000)
    profiles = building_profiles(n_profiles)
    events = building_events(n_events)
    expect = predicted(profiles, events)
    load = os.getloadavg()
    runs: dict[str, list[dict[str, Any]]] = {"siftbus": [], "mosquitto": []}
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        for i in range(args.repeats):  # interleaved: both see the same machine state
            (tmp / f"s{i}").mkdir()
            runs["siftbus"].append(run_siftbus(tmp / f"s{i}", profiles, events, expect,
                                               args.timeout))
            runs["mosquitto"].append(run_mosquitto(tmp, profiles, events, expect,
                                                   args.timeout))
    med = {k: statistics.median(r["events_per_s"] for r in v) for k, v in runs.items()}
    out = {"events": n_events, "profiles": n_profiles, "expected_notifications": expect,
           "repeats": args.repeats, "loadavg_before": load, "loadavg_after": os.getloadavg(),
           "median_events_per_s": med, "runs": runs}
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "mqtt.json").write_text(json.dumps(out, indent=2) + "\n")
    print(f"\n### MQTT in -> MQTT out: {n_events:,} events, {n_profiles:,} profiles, "
          f"{expect:,} notifications (load {load[0]:.2f} before, "
          f"{out['loadavg_after'][0]:.2f} after)\n")
    print("| system | events/s (median) | runs | complete | CPU s (median, per process) |")
    print("|---|---|---|---|---|")
    for k, v in runs.items():
        cpus = {c: statistics.median(r[c] for r in v) for c in v[0] if c.startswith("cpu_")}
        each = ", ".join(f"{r['events_per_s']:,.0f}" for r in v)
        print(f"| {v[0]['system']} | {med[k]:,.0f} | {each} | "
              f"{all(r['complete'] for r in v)} | "
              f"{', '.join(f'{c[4:-2]} {s:.2f}' for c, s in cpus.items())} |")


if __name__ == "__main__":
    main()
