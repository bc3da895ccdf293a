"""The ``[security]`` section of a network config and the broker command's safe defaults:
every mistake is one clear error with its line; an open network listens on loopback only."""

from __future__ import annotations

from pathlib import Path

import pytest

from hostile import run_bad
from secure import make_pki
from siftbus.broker.config import load_network, parse_network
from siftbus.errors import ConfigError
from siftbus.model import load_schema

SCHEMA_PATH = Path(__file__).resolve().parents[2] / "examples" / "building" / "schema.toml"
SCHEMA = load_schema(SCHEMA_PATH)
BROKER = '[brokers.B0]\nport = 7400\ncert = "B0.pem"\nkey = "B0.key"\n'


def _config(tmp: Path, text: str) -> Path:
    p = tmp / "net.toml"
    p.write_text(text)
    return p


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("certs")
    make_pki(d, brokers=("B0",), clients=())
    return d


def test_a_secure_config_builds_tls_servers_and_guards(certs: Path) -> None:
    text = ('[network]\n[security]\nca = "ca.pem"\ntoken_key = "token.key"\n'
            '[security.principals.ops]\nsubscribe = ["*"]\nmax_profiles = 10\n' + BROKER)
    net = load_network(_config(certs, f'[network]\nschema = "{SCHEMA_PATH}"\n'
                               + text.removeprefix("[network]\n")))
    assert not net.security.open and net.security.authenticates
    assert net.brokers["B0"].cert == certs / "B0.pem"
    server = net.server("B0")
    assert server.tls is not None and server.listener.ssl is not None
    assert not server.node.guard.open


@pytest.mark.parametrize(("text", "message", "line"), [
    ('[security]\nca = "ca.pem"\n[brokers.B0]\nport = 1\n', "needs cert and key", 3),
    ('[brokers.B0]\nport = 1\ncert = "B0.pem"\nkey = "B0.key"\n', "need a [security]", 3),
    ('[security]\nanonymous = true\n' + BROKER, "cert without a [security] ca", 5),
    ('[securty]\nca = "ca.pem"\n' + BROKER, "unknown table [securty]", 1),
    ('[security]\nca = "ca.pem"\nnarow = true\n' + BROKER, "unknown keys narow", None),
    ('[security]\nca = "nope.pem"\n' + BROKER, "does not exist", None),
    ('[security]\nca = "ca.pem"\n[security.principals.b3]\nsubscribe = ["Temperature(x = 1)"]\n'
     + BROKER, "security.principals.b3.subscribe", None),
    ('[security]\nca = "ca.pem"\n[security.principals.b3]\npublish_rate = -1\n' + BROKER,
     "publish_rate", None),
    ('[security]\nca = "ca.pem"\n[security.principals.b3]\nservices = "broker.*"\n' + BROKER,
     "list of strings", None),
])
def test_security_mistakes_are_one_error(certs: Path, text: str, message: str,
                                         line: int | None) -> None:
    with pytest.raises(ConfigError, match=message.replace("[", r"\[")) as info:
        parse_network("[network]\n" + text, path=certs / "net.toml", schema=SCHEMA)
    if line is not None:
        assert info.value.line == line + 1


def test_the_broker_command_refuses_an_open_public_address(tmp_path: Path) -> None:
    cfg = _config(tmp_path, f'[network]\nschema = "{SCHEMA_PATH}"\n'
                  '[brokers.B0]\nhost = "0.0.0.0"\nport = 7400\n')
    line = run_bad(["broker", "-c", str(cfg), "-n", "B0"], where="--insecure")
    assert "without TLS and authentication" in line


def test_client_commands_name_what_is_missing(tmp_path: Path, certs: Path) -> None:
    run_bad(["subscribe", "--broker", "127.0.0.1:1", "--cert", str(certs / "B0.pem"),
             "T(a = 1)"], where="--ca")
