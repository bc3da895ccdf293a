"""The ``siftbus`` command.

Each module of this package that defines ``register(app: typer.Typer)`` adds its
commands; modules keep heavy imports (Spark, lxml, numba) inside their command
functions so that ``siftbus --help`` stays fast.
"""

from __future__ import annotations

import importlib
import pkgutil
import sys

import typer

from siftbus.errors import SiftbusError

app = typer.Typer(
    name="siftbus",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    # help texts show TOML tables and JSON literally ("[spark]", "[ids...]")
    rich_markup_mode=None,
)


def _register_all() -> None:
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        if info.name.startswith("_"):
            continue
        module = importlib.import_module(f"{__name__}.{info.name}")
        register = getattr(module, "register", None)
        if register is not None:
            register(app)


def _version(value: bool) -> None:
    if value:
        from siftbus import __version__

        print(f"siftbus {__version__}")
        raise typer.Exit()


@app.callback()
def _root(version: bool = typer.Option(False, "--version", callback=_version,
                                       is_eager=True, help="Print the version and exit.")
          ) -> None:
    """Content-based publish/subscribe: match events against profiles, route them through
    brokers, channels, XML filters and Spark."""


_register_all()


def main() -> None:
    """Console-script entry point: one clear line and a non-zero exit on bad input."""
    try:
        app()
    except SiftbusError as exc:
        print(f"siftbus: error: {exc}", file=sys.stderr)
        sys.exit(2)
    except KeyboardInterrupt:
        print("siftbus: interrupted", file=sys.stderr)
        sys.exit(130)
