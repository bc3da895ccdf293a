"""``siftbus certs``: a certificate authority and tokens for a secure network."""

from __future__ import annotations

import os
from enum import StrEnum
from pathlib import Path
from typing import Annotated

import typer


class Kind(StrEnum):
    broker = "broker"
    server = "server"
    client = "client"


def register(app: typer.Typer) -> None:
    certs = typer.Typer(help="Create a CA, issue certificates and tokens (two commands to a "
                             "secure network: certs init, then certs issue per broker).",
                        no_args_is_help=True)
    app.add_typer(certs, name="certs")

    @certs.command("init")
    def init(directory: Annotated[Path, typer.Argument(help="where ca.pem, ca.key and "
                                                             "token.key are written")],
             days: Annotated[int, typer.Option(help="validity of the CA")] = 3650,
             force: Annotated[bool, typer.Option(help="replace an existing CA")] = False,
             ) -> None:
        """Create a certificate authority and a token signing key."""
        from siftbus.errors import ConfigError
        from siftbus.security.certs import init_ca
        from siftbus.security.tokens import new_secret

        try:
            issued = init_ca(directory, days=days, overwrite=force)
        except ConfigError as exc:  # the library's "overwrite" is this command's --force
            if "already holds a CA" not in exc.message:
                raise
            raise ConfigError(f"{directory} already holds a CA; pass --force to replace "
                              "it (every certificate and token it signed stops "
                              "verifying)", field="force") from None
        key = directory / "token.key"
        if force or not key.exists():
            fd = os.open(key, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            with os.fdopen(fd, "wb") as f:
                f.write(new_secret() + b"\n")
        print(f"CA certificate {issued.cert}\nCA key         {issued.key}\n"
              f"token key      {key}")

    @certs.command("issue")
    def issue_cmd(name: Annotated[str, typer.Argument(help="common name: a broker's name or "
                                                            "a client's principal")],
                  ca: Annotated[Path, typer.Option(help="directory of the CA")] = Path("."),
                  kind: Annotated[Kind, typer.Option(help="broker: server and client use "
                                                          "(mutual TLS links)")] = Kind.broker,
                  host: Annotated[list[str] | None, typer.Option(
                      help="DNS name or IP address the server answers on (repeatable)")] = None,
                  out: Annotated[Path | None, typer.Option(help="output directory "
                                                                "(default: the CA's)")] = None,
                  days: Annotated[int, typer.Option(help="validity")] = 825) -> None:
        """Issue a certificate signed by the CA: NAME.pem and NAME.key."""
        from siftbus.security.certs import CertKind, issue

        issued = issue(ca, name, kind=CertKind(kind.value),
                       hosts=tuple(host) if host else ("localhost", "127.0.0.1"),
                       out_dir=out, days=days)
        print(f"certificate {issued.cert}\nkey         {issued.key}")

    @certs.command("token")
    def token(principal: Annotated[str, typer.Argument(help="the token's subject")],
              key: Annotated[Path, typer.Option(help="token signing key")] = Path("token.key"),
              ttl: Annotated[float, typer.Option(help="validity in seconds")] = 86400.0,
              scope: Annotated[list[str] | None, typer.Option(help="scope (repeatable)")] = None,
              ) -> None:
        """Print a signed token for a client (pass it with --token or SIFTBUS_TOKEN)."""
        from siftbus.security.tokens import TokenSigner, load_secret

        print(TokenSigner(load_secret(key)).issue(principal, ttl=ttl, scopes=scope or ()))
