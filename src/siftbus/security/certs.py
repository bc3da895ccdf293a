"""A small certificate authority for a siftbus network (``siftbus certs init|issue``).

``init`` creates ``ca.pem`` and ``ca.key`` in a directory; ``issue NAME`` signs a
certificate for a broker (server and client use, so it can both accept and dial its
neighbours over mutual TLS) or for a client (client use only). The certificate's common
name is the principal: a broker's name as in the network config, a client's principal.
Keys are ECDSA P-256 and written with mode 0600.
"""

from __future__ import annotations

import datetime as dt
import enum
import ipaddress
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from siftbus.errors import ConfigError

CA_CERT = "ca.pem"
CA_KEY = "ca.key"


class CertKind(enum.Enum):
    """What a certificate may be used for."""

    BROKER = "broker"
    """Server and client authentication: a broker accepts and dials links."""
    SERVER = "server"
    """Server authentication only (a channel server, an HTTP endpoint)."""
    CLIENT = "client"
    """Client authentication only."""


@dataclass(frozen=True, slots=True)
class Issued:
    """Paths of a certificate and its key."""

    cert: Path
    key: Path


def _write_key(path: Path, key: ec.EllipticCurvePrivateKey) -> None:
    data = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption())
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(data)


def _name(common_name: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.ORGANIZATION_NAME, "siftbus"),
                      x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def init_ca(directory: str | Path, *, name: str = "siftbus CA", days: int = 3650,
            overwrite: bool = False) -> Issued:
    """Create a CA certificate and key in ``directory``."""
    d = Path(directory)
    d.mkdir(parents=True, exist_ok=True)
    cert_path, key_path = d / CA_CERT, d / CA_KEY
    if not overwrite and (cert_path.exists() or key_path.exists()):
        raise ConfigError(f"{d} already holds a CA; pass overwrite to replace it",
                          source=str(d))
    key = ec.generate_private_key(ec.SECP256R1())
    now = dt.datetime.now(dt.UTC)
    cert = (x509.CertificateBuilder()
            .subject_name(_name(name)).issuer_name(_name(name))
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - dt.timedelta(minutes=5))
            .not_valid_after(now + dt.timedelta(days=days))
            .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
            .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True,
                                         crl_sign=True, content_commitment=False,
                                         key_encipherment=False, data_encipherment=False,
                                         key_agreement=False, encipher_only=False,
                                         decipher_only=False), critical=True)
            .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()),
                           critical=False)
            .sign(key, hashes.SHA256()))
    _write_key(key_path, key)
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    return Issued(cert_path, key_path)


def _load_ca(directory: Path) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
    try:
        cert = x509.load_pem_x509_certificate((directory / CA_CERT).read_bytes())
        key = serialization.load_pem_private_key((directory / CA_KEY).read_bytes(), None)
    except (OSError, ValueError) as exc:
        raise ConfigError(f"no usable CA in {directory} (run 'siftbus certs init' first): "
                          f"{exc}", source=str(directory)) from None
    if not isinstance(key, ec.EllipticCurvePrivateKey):
        raise ConfigError(f"the CA key in {directory} is not an EC key", source=str(directory))
    return cert, key


def _san(hosts: Sequence[str]) -> x509.SubjectAlternativeName:
    names: list[x509.GeneralName] = []
    for h in hosts:
        try:
            names.append(x509.IPAddress(ipaddress.ip_address(h)))
        except ValueError:
            names.append(x509.DNSName(h))
    return x509.SubjectAlternativeName(names)


def issue(ca_dir: str | Path, name: str, *, kind: CertKind = CertKind.BROKER,
          hosts: Sequence[str] = ("localhost", "127.0.0.1"), out_dir: str | Path | None = None,
          days: int = 825) -> Issued:
    """Sign a certificate whose common name is ``name``; writes NAME.pem and NAME.key."""
    if not name or "/" in name or name.startswith("."):
        raise ConfigError(f"{name!r} is not a usable certificate name")
    ca_path = Path(ca_dir)
    ca_cert, ca_key = _load_ca(ca_path)
    out = Path(out_dir) if out_dir is not None else ca_path
    out.mkdir(parents=True, exist_ok=True)
    key = ec.generate_private_key(ec.SECP256R1())
    usages = {CertKind.BROKER: [ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH],
              CertKind.SERVER: [ExtendedKeyUsageOID.SERVER_AUTH],
              CertKind.CLIENT: [ExtendedKeyUsageOID.CLIENT_AUTH]}[kind]
    now = dt.datetime.now(dt.UTC)
    builder = (x509.CertificateBuilder()
               .subject_name(_name(name)).issuer_name(ca_cert.subject)
               .public_key(key.public_key()).serial_number(x509.random_serial_number())
               .not_valid_before(now - dt.timedelta(minutes=5))
               .not_valid_after(now + dt.timedelta(days=days))
               .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
               .add_extension(x509.ExtendedKeyUsage(usages), critical=False)
               .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(
                   ca_key.public_key()), critical=False))
    if kind is not CertKind.CLIENT and hosts:
        builder = builder.add_extension(_san(hosts), critical=False)
    cert = builder.sign(ca_key, hashes.SHA256())
    issued = Issued(out / f"{name}.pem", out / f"{name}.key")
    _write_key(issued.key, key)
    issued.cert.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    return issued


def common_name(pem: bytes) -> str:
    """The common name of a PEM certificate."""
    cert = x509.load_pem_x509_certificate(pem)
    names = cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)
    return str(names[0].value) if names else ""
