"""The ``siftbus`` command.

Each module of this package that defines ``register(app: typer.Typer)`` adds its
commands; modules keep heavy imports (Spark, lxml, numba) inside their command
functions so that ``siftbus --help`` stays fast. Run as the ``siftbus`` command with a
command that has a module of its own name (``siftbus match``), only that module is
imported and registered (start-up); everything else registers every module.
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
    add_completion=True,  # --install-completion / --show-completion for the user's shell
    context_settings={"max_content_width": 100},
    pretty_exceptions_enable=False,
    # help texts show TOML tables and JSON literally ("[spark]", "[ids...]")
    rich_markup_mode=None,
)


def _register_all() -> None:
    if _register_only_the_command():
        return
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        if info.name.startswith("_"):
            continue
        _register(info.name)


def _register(name: str) -> None:
    module = importlib.import_module(f"{__name__}.{name}")
    register = getattr(module, "register", None)
    if register is not None:
        register(app)


def _register_only_the_command() -> bool:
    """Run as the ``siftbus`` command (not imported by tests or other code) with a command
    that has a module of its own name: register that module's commands only, when that
    gives the command (start-up: importing every command's module costs about 0.2 s of CPU,
    the whole start-up budget of a small ``siftbus match``). Returns whether it did."""
    argv0 = sys.argv[0].replace("\\", "/") if sys.argv else ""
    if not (argv0.endswith("/siftbus") or argv0 == "siftbus"
            or argv0.endswith("siftbus/__main__.py")) or len(sys.argv) < 2:
        return False
    name = sys.argv[1]
    if name.startswith("_") or not any(m.name == name for m in pkgutil.iter_modules(__path__)):
        return False
    _register(name)
    names = {c.name for c in app.registered_commands} | {g.name for g in app.registered_groups}
    if name in names:
        return True
    app.registered_commands.clear()  # not there after all: register everything
    app.registered_groups.clear()
    return False


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
    from siftbus.cli._help import polish

    command = typer.main.get_command(app)
    polish(command)
    try:
        from siftbus.telemetry import enable_from_env

        enable_from_env()  # SIFTBUS_TRACING=1: spans of every command (docs/tracing.md)
        command(prog_name="siftbus")
    except SiftbusError as exc:
        print(f"siftbus: error: {exc}", file=sys.stderr)
        sys.exit(2)
    except MemoryError:  # past every budget check: the machine itself ran out
        print("siftbus: error: out of memory; lower the input or the budgets "
              "(SIFTBUS_INDEX_BUDGET, docs/matching.md)", file=sys.stderr)
        sys.exit(2)
    except KeyboardInterrupt:
        print("siftbus: interrupted", file=sys.stderr)
        sys.exit(130)
