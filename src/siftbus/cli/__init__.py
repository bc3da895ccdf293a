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
    help="Content-based publish/subscribe: match events against profiles, route them "
    "through brokers, channels, XML filters and Spark.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


def _register_all() -> None:
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        if info.name.startswith("_"):
            continue
        module = importlib.import_module(f"{__name__}.{info.name}")
        register = getattr(module, "register", None)
        if register is not None:
            register(app)


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
