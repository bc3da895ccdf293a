"""Tokens, certificates and TLS contexts: what is accepted, what is refused."""

from __future__ import annotations

import asyncio
import os
import ssl
import time
from pathlib import Path

import jwt
import pytest

from siftbus.errors import AuthenticationError, ConfigError
from siftbus.model import Schema
from siftbus.security.certs import CertKind, common_name, init_ca, issue
from siftbus.security.policy import OPEN, Authenticator, SecurityPolicy
from siftbus.security.principal import PrincipalKind
from siftbus.security.tls import ContextSet, TLSConfig, client_context, server_context
from siftbus.security.tokens import TokenSigner, new_secret

SECRET = new_secret()


def test_a_token_proves_its_principal_and_scopes() -> None:
    s = TokenSigner(SECRET)
    p = s.verify(s.issue("b3", ttl=60, scopes=["subscribe", "call"]))
    assert (p.name, p.kind, p.scopes) == ("b3", PrincipalKind.TOKEN,
                                           frozenset({"subscribe", "call"}))


@pytest.mark.parametrize("mutate", [
    lambda t: t[:-2] + ("AA" if t[-2:] != "AA" else "BB"),   # signature changed
    lambda t: t.split(".")[0] + ".eyJzdWIiOiJyb290In0." + t.split(".")[2],  # payload swapped
    lambda t: jwt.encode({"sub": "b3", "aud": "siftbus", "exp": time.time() + 60}, None,
                         algorithm="none"),  # unsigned
    lambda t: jwt.encode({"sub": "b3", "aud": "siftbus", "exp": time.time() + 60},
                         b"k" * 40, algorithm="HS256"),  # another key
    lambda t: jwt.encode({"sub": "b3", "aud": "other", "exp": time.time() + 60},
                         SECRET, algorithm="HS256"),  # another audience
    lambda t: jwt.encode({"sub": "b3", "aud": "siftbus"}, SECRET, algorithm="HS256"),  # no exp
    lambda t: "not a token",
    lambda t: 42,
    lambda t: "x" * 100_000,
])
def test_tampered_foreign_and_malformed_tokens_are_refused(mutate) -> None:  # type: ignore[no-untyped-def]
    s = TokenSigner(SECRET)
    with pytest.raises(AuthenticationError):
        s.verify(mutate(s.issue("b3", ttl=60)))


def test_an_expired_token_is_refused_after_the_leeway() -> None:
    s = TokenSigner(SECRET)
    t = s.issue("b3", ttl=10, now=1000.0)
    assert s.verify(t, now=1030.0).name == "b3"  # within 30 s of skew
    with pytest.raises(AuthenticationError, match="expired"):
        s.verify(t, now=1100.0)


def test_short_keys_are_refused() -> None:
    with pytest.raises(ConfigError):
        TokenSigner(b"short")


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("pki")
    init_ca(d)
    issue(d, "B1", kind=CertKind.BROKER)
    issue(d, "B2", kind=CertKind.BROKER)
    issue(d, "alice", kind=CertKind.CLIENT)
    other = d / "other"
    init_ca(other, name="someone else")
    issue(other, "B2", kind=CertKind.BROKER)
    return d


def test_certificates_carry_their_name_and_keys_are_private(pki: Path) -> None:
    assert common_name((pki / "B1.pem").read_bytes()) == "B1"
    assert os.stat(pki / "B1.key").st_mode & 0o777 == 0o600
    with pytest.raises(ConfigError, match="already holds a CA"):
        init_ca(pki)


async def _handshake(server: ssl.SSLContext, client: ssl.SSLContext) -> str | None:
    """Connect once; returns the common name the server saw, or raises the client's error."""
    seen: asyncio.Future[str | None] = asyncio.get_running_loop().create_future()

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        from siftbus.security.tls import peer_common_name

        if not seen.done():
            seen.set_result(peer_common_name(writer.get_extra_info("ssl_object")))
        writer.write(b"ok")
        await writer.drain()
        writer.close()

    srv = await asyncio.start_server(handle, "127.0.0.1", 0, ssl=server)
    port = srv.sockets[0].getsockname()[1]
    try:
        reader, writer = await asyncio.wait_for(
            asyncio.open_connection("127.0.0.1", port, ssl=client, server_hostname="localhost"),
            10)
        assert await asyncio.wait_for(reader.read(2), 10) == b"ok"
        writer.close()
        return await asyncio.wait_for(seen, 10)
    finally:
        srv.close()
        await srv.wait_closed()


async def test_mutual_tls_names_the_peer(pki: Path) -> None:
    srv = server_context(TLSConfig(pki / "B1.pem", pki / "B1.key", pki / "ca.pem", True))
    cli = client_context(TLSConfig(pki / "B2.pem", pki / "B2.key", pki / "ca.pem"))
    assert await _handshake(srv, cli) == "B2"


async def _refused(server: ssl.SSLContext, client: ssl.SSLContext) -> bool:
    """With TLS 1.3 the server refuses a client certificate after the client's side of the
    handshake is done: the client then reads an error or the end of the stream."""
    try:
        await _handshake(server, client)
    except (ssl.SSLError, ConnectionError, AssertionError):
        return True
    return False


async def test_a_certificate_of_another_ca_or_none_is_refused(pki: Path) -> None:
    srv = server_context(TLSConfig(pki / "B1.pem", pki / "B1.key", pki / "ca.pem", True))
    foreign = client_context(TLSConfig(pki / "other" / "B2.pem", pki / "other" / "B2.key",
                                       pki / "ca.pem"))
    assert await _refused(srv, foreign)
    bare = client_context(TLSConfig(None, None, pki / "ca.pem"))
    assert await _refused(srv, bare)
    good = client_context(TLSConfig(pki / "B2.pem", pki / "B2.key", pki / "ca.pem"))
    assert not await _refused(srv, good)


async def test_a_client_that_does_not_trust_the_server_refuses_it(pki: Path) -> None:
    srv = server_context(TLSConfig(pki / "other" / "B2.pem", pki / "other" / "B2.key",
                                   pki / "ca.pem"))
    cli = client_context(TLSConfig(None, None, pki / "ca.pem"))
    with pytest.raises(ssl.SSLCertVerificationError):
        await _handshake(srv, cli)


async def test_certificates_reload_without_restart(tmp_path: Path) -> None:
    init_ca(tmp_path)
    issue(tmp_path, "B1")
    contexts = ContextSet(TLSConfig(tmp_path / "B1.pem", tmp_path / "B1.key",
                                    tmp_path / "ca.pem"))
    assert not contexts.reload_if_changed()
    before = (tmp_path / "B1.pem").read_bytes()
    issue(tmp_path, "B1")
    st = (tmp_path / "B1.pem").stat()
    os.utime(tmp_path / "B1.pem", (st.st_atime, st.st_mtime + 5))
    assert (tmp_path / "B1.pem").read_bytes() != before
    assert contexts.reload_if_changed()
    assert contexts.server is not None
    cli = client_context(TLSConfig(None, None, tmp_path / "ca.pem"))
    assert await _handshake(contexts.server, cli) is None  # no client certificate sent


SCHEMA = Schema.from_dict({"Temperature": {"building": "int[1,9]", "value": "int[0,50]"}})


def test_the_authenticator_binds_names_to_credentials(pki: Path, tmp_path: Path) -> None:
    key = tmp_path / "token.key"
    key.write_bytes(SECRET)
    policy = SecurityPolicy.from_toml(
        {"ca": str(pki / "ca.pem"), "token_key": str(key),
         "principals": {"b3": {"subscribe": ["Temperature(building = 3)"]}}},
        SCHEMA, base=Path("/"), brokers=["B1", "B2"])
    auth = Authenticator(policy)
    token = TokenSigner(SECRET).issue("b3")
    assert auth.client(token).name == "b3"
    with pytest.raises(AuthenticationError, match="credentials required"):
        auth.client(None)
    with pytest.raises(AuthenticationError, match="no certificate"):
        auth.broker("B1")
    rights = policy.rights(auth.client(token))
    assert rights.subscribe.of_type("Temperature") and not rights.publish.of_type("Temperature")
    assert OPEN.rights(auth.client(token)).subscribe.everything


def test_security_config_errors_name_the_key(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="unknown keys"):
        SecurityPolicy.from_toml({"anonymus": True}, SCHEMA, base=tmp_path, brokers=[])
    with pytest.raises(ConfigError, match="needs a ca"):
        SecurityPolicy.from_toml({}, SCHEMA, base=tmp_path, brokers=[])
    with pytest.raises(ConfigError, match="does not exist"):
        SecurityPolicy.from_toml({"ca": "nope.pem"}, SCHEMA, base=tmp_path, brokers=[])
    with pytest.raises(ConfigError, match="max_profiles"):
        SecurityPolicy.from_toml({"anonymous": True, "default": {"max_profiles": -1}},
                                 SCHEMA, base=tmp_path, brokers=[])


def test_two_commands_make_a_ca_and_a_broker_certificate(tmp_path: Path) -> None:
    from hostile import run_bad, run_cli

    ca = tmp_path / "ca"
    assert run_cli(["certs", "init", str(ca)]).returncode == 0
    assert run_cli(["certs", "issue", "B1", "--ca", str(ca), "--host", "b1.example"]
                   ).returncode == 0
    assert common_name((ca / "B1.pem").read_bytes()) == "B1"
    tok = run_cli(["certs", "token", "b3", "--key", str(ca / "token.key"), "--ttl", "60"])
    assert tok.returncode == 0, tok.stderr
    from siftbus.security.tokens import load_secret

    assert TokenSigner(load_secret(ca / "token.key")).verify(tok.stdout.strip()).name == "b3"
    run_bad(["certs", "init", str(ca)], where="already holds a CA")
    run_bad(["certs", "issue", "B2", "--ca", str(tmp_path / "none")], where="no usable CA")
