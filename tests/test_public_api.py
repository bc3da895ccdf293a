"""The public surface is exactly ``siftbus.__all__``, and each name is importable."""

import ast
import importlib
from pathlib import Path

import pytest

import siftbus


def test_all_names_exist_and_are_unique() -> None:
    assert len(set(siftbus.__all__)) == len(siftbus.__all__)
    for name in siftbus.__all__:
        assert getattr(siftbus, name) is not None


def test_no_accidental_public_names() -> None:
    for name in siftbus.__all__:  # load the lazily imported names
        getattr(siftbus, name)
    public = {n for n in vars(siftbus) if not n.startswith("_")}
    modules = {n for n in public if type(getattr(siftbus, n)).__name__ == "module"}
    assert public - modules == set(siftbus.__all__)


def test_every_error_is_a_siftbus_error_and_refines_a_builtin() -> None:
    for name in siftbus.__all__:
        obj = getattr(siftbus, name)
        if isinstance(obj, type) and issubclass(obj, BaseException):
            assert issubclass(obj, siftbus.SiftbusError)
            if obj is siftbus.SiftbusError:
                continue
            roots = {Exception, BaseException, object}
            assert any(b.__module__ == "builtins" and b not in roots
                       for b in obj.__mro__[1:]), name


def test_quick_start_from_the_readme() -> None:
    schema = siftbus.parse_schema('[Temperature]\nroom = "int[1,300]"\n'
                                  'value = "decimal[-40,60,1]"\n')
    matcher = siftbus.make_matcher("reference")
    matcher.add(siftbus.parse_profile("warm: Temperature(room = 12, value > 20)", schema))
    event = siftbus.parse_event('{"type": "Temperature", "room": 12, "value": 21.5}', schema)
    assert matcher.match(event) == ["warm"]


def test_composite_quick_start() -> None:
    schema = siftbus.parse_schema('[GlassBreak]\nroom = "int[1,300]"\nlevel = "int[0,10]"\n'
                                  '[Motion]\nroom = "int[1,300]"\npresent = "int[0,1]"\n')
    alarm = siftbus.parse_composite("alarm@security: GlassBreak(level > 5) -> "
                                    "Motion(present = 1) within 60 s same room", schema)
    engine = siftbus.CompositeEngine(matcher="reference")
    engine.add(alarm)
    out = []
    for t, line in enumerate(['{"type": "GlassBreak", "room": 3, "level": 8}',
                              '{"type": "Motion", "room": 3, "present": 1}']):
        event = siftbus.parse_event(line, schema)
        out += engine.offer(siftbus.StampedEvent(event, t * 10_000_000, (t,)))
    out += engine.advance(11_000_000)  # the clock passes the motion's time: it is evaluated
    assert [(m.profile, m.subscriber, [lab for lab, _ in m.bindings]) for m in out] == [
        ("alarm", "security", ["GlassBreak", "Motion"])]
    assert siftbus.parse_composite(siftbus.format_composite(alarm), schema) == alarm


def test_importing_siftbus_does_not_load_numba() -> None:
    import subprocess
    import sys

    code = "import sys, siftbus; print('numba' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, timeout=60).stdout.strip()
    assert out == "False"


async def test_broker_quick_start_from_the_readme() -> None:
    """The README's broker example, on an ephemeral port, through public names only."""
    import asyncio

    schema = siftbus.load_schema("examples/building/schema.toml")
    limits = siftbus.Limits(max_connections=100)  # every server limit has a default
    async with (siftbus.BrokerServer(siftbus.BrokerNode("B1", schema), port=0,
                                     limits=limits) as server,
                await siftbus.connect(port=server.port) as client):
        sub = await client.subscribe("Temperature(room = 12, value > 20)")
        await client.publish({"type": "Temperature", "sensor": 1, "room": 12,
                              "value": 19.0})
        await client.publish({"type": "Temperature", "sensor": 1, "room": 12,
                              "value": 21.5})
        note = await sub.get(timeout=5)
        assert note.event["room"] == 12
        assert note.event.key("value") == 215  # decimals are keyed by their places
        with pytest.raises(asyncio.TimeoutError):  # the 19.0 event matched nothing
            await sub.get(timeout=0.3)


def test_gateway_and_explain_are_public() -> None:
    assert siftbus.GatewayServer.__module__ == "siftbus.gateway.server"
    assert siftbus.GatewayLimits().max_body > 0
    schema = siftbus.parse_schema('[T]\na = "int[0,9]"\n')
    result = siftbus.explain(schema, "T(a > 5)", siftbus.parse_event('{"type": "T", "a": 7}',
                                                                     schema))
    assert isinstance(result, siftbus.Explanation) and result.matches


def test_temporal_quick_start() -> None:
    """Persistent notifications through public names only: a late subscriber gets what
    is still valid, then the changes."""
    schema = siftbus.parse_schema('[Document]\nroom = "int[1,300]"\n')
    doc = siftbus.parse_profile("x: Document(room in [10, 14])", schema)
    df = siftbus.DoubleForest(now=0.0)
    df.publish(siftbus.PersistentNotification("memo", doc, "alice", siftbus.Validity(0, 60)))
    me = siftbus.TemporalFilter(siftbus.parse_profile("me: Document(room = 12)", schema),
                                siftbus.Semantics.OVERLAPS)
    got = df.subscribe(me)
    assert [c.notification.id for c in got] == ["memo"]
    assert all(isinstance(c, siftbus.Change) for c in got)
    assert [c.kind.value for c in df.advance(60)] == ["remove"]
    assert isinstance(siftbus.PreloadPolicy().max_cells, int)


async def test_a_secured_broker_through_public_names(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """Tokens and a content-based right, with public names only (TLS: docs/security.md)."""
    schema = siftbus.load_schema("examples/building/schema.toml")
    key = tmp_path / "token.key"
    key.write_bytes(b"k" * 64)
    policy = siftbus.SecurityPolicy.from_toml(
        {"token_key": "token.key",
         "principals": {"floor4": {"subscribe": ["Temperature(room in [121, 150])"]}}},
        schema, base=tmp_path, brokers=["B1"])
    token = siftbus.TokenSigner(key.read_bytes()).issue("floor4", ttl=60)
    node = siftbus.BrokerNode("B1", schema, guard=siftbus.Guard(policy))
    async with (siftbus.BrokerServer(node, port=0) as server,
                await siftbus.connect(port=server.port, token=token) as client):
        await client.subscribe("Temperature(room = 130)")
        with pytest.raises(siftbus.SiftbusError, match="may not subscribe"):
            await client.subscribe("Temperature(room = 200)")
    assert siftbus.bearer_token(f"Bearer {token}") == token  # HTTP servers (the gateway)
    with pytest.raises(siftbus.ConfigError, match="--insecure"):
        siftbus.check_bind("0.0.0.0", tls=False, authenticated=True, insecure=False,
                           what="a server")
    assert issubclass(siftbus.AccessDenied, siftbus.SecurityError)
    assert issubclass(siftbus.QuotaExceeded, PermissionError)


def test_readers_and_limits_are_public() -> None:
    import io

    assert list(siftbus.read_lines(io.BytesIO(b"\xef\xbb\xbfa\rb"))) == [(1, "a"), (2, "b")]
    with pytest.raises(siftbus.InputError, match="nested deeper than 3"):
        siftbus.parse_json_line("[[[[1]]]]", limits=siftbus.TextLimits(max_json_depth=3))
    schema = siftbus.parse_schema('[T]\na = "int[0,9]"\n')
    with pytest.raises(siftbus.ProfileSyntaxError, match="more than 1 conditions"):
        siftbus.parse_profile("p: T(a > 1, a < 5)", schema,
                              limits=siftbus.ProfileLimits(max_conditions=1))


def test_sessions_and_mobility_are_public() -> None:
    state = siftbus.SessionState("phone", limits={"max_count": 10})
    assert state.hello(None, [], [])["limits"] == {"max_count": 10}
    policy = siftbus.SessionPolicy.from_mapping({"max_count": 10, "handoff_timeout": 5})
    assert policy.limits == siftbus.SessionLimits(max_count=10)


def test_one_table_names_every_public_name_and_its_home() -> None:
    """``_EXPORTS`` is the one list of public names: the imports for type checkers name the
    same modules, and each name is the object its module defines."""
    tree = ast.parse(Path(siftbus.__file__).read_text(encoding="utf-8"))
    static = {a.name: n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)
              for a in n.names if n.module and n.module.startswith("siftbus")}
    assert static == siftbus._EXPORTS
    assert siftbus.__all__ == list(siftbus._EXPORTS)
    for name, module in siftbus._EXPORTS.items():
        assert getattr(importlib.import_module(module), name) is getattr(siftbus, name)
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        siftbus.nope  # noqa: B018
