"""The ``siftbus`` command.

Each module of this package that defines ``register(app: typer.Typer)`` adds its
commands; modules keep heavy imports (Spark, lxml, numba) inside their command
functions so that ``siftbus --help`` stays fast. Run as the ``siftbus`` command with a
command that has a module of its own name (``siftbus match``), only that module is
imported and registered (start-up); everything else registers every module. The
application (``app``) is made when first used: ``siftbus match`` with plain options runs
without typer (:func:`siftbus.cli._matchfiles.fast_command`).
"""

from __future__ import annotations

import importlib
import os
import pkgutil
import sys
from typing import TYPE_CHECKING, NoReturn

from siftbus.errors import SiftbusError

if TYPE_CHECKING:
    import typer


def __getattr__(name: str) -> typer.Typer:
    """``app``, the typer application: made (typer imported, the commands registered)
    when first asked for, so that ``siftbus match`` with plain options starts without
    typer (:func:`siftbus.cli._matchfiles.fast_command`)."""
    if name != "app":
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return _app()


def _app() -> typer.Typer:
    made: typer.Typer | None = globals().get("app")
    if made is None:
        made = globals()["app"] = _make_app()
    return made


def _make_app() -> typer.Typer:
    import typer

    made = typer.Typer(
        name="siftbus",
        no_args_is_help=True,
        add_completion=True,  # --install-completion / --show-completion for the user's shell
        context_settings={"max_content_width": 100},
        pretty_exceptions_enable=False,
        # help texts show TOML tables and JSON literally ("[spark]", "[ids...]")
        rich_markup_mode=None,
    )

    def _version(value: bool) -> None:
        if value:
            from siftbus import __version__

            print(f"siftbus {__version__}")
            raise typer.Exit()

    @made.callback()
    def _root(version: bool = typer.Option(False, "--version", callback=_version,
                                           is_eager=True, help="Print the version and exit.")
              ) -> None:
        """Content-based publish/subscribe: match events against profiles, route them
        through brokers, channels, XML filters and Spark."""

    _register_all(made)
    return made


def _register_all(app: typer.Typer) -> None:
    if _register_only_the_command(app):
        return
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        if info.name.startswith("_"):
            continue
        _register(app, info.name)


def _register(app: typer.Typer, name: str) -> None:
    module = importlib.import_module(f"{__name__}.{name}")
    register = getattr(module, "register", None)
    if register is not None:
        register(app)


def _register_only_the_command(app: typer.Typer) -> bool:
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
    _register(app, name)
    names = {c.name for c in app.registered_commands} | {g.name for g in app.registered_groups}
    if name in names:
        return True
    app.registered_commands.clear()  # not there after all: register everything
    app.registered_groups.clear()
    return False


def main() -> None:
    """Console-script entry point: one clear line and a non-zero exit on bad input."""
    try:
        from siftbus.telemetry import enable_from_env

        enable_from_env()  # SIFTBUS_TRACING=1: spans of every command (docs/tracing.md)
        if sys.argv[1:2] == ["match"]:
            import gc

            # the job runs with the collector paused (match_files); its imports too: the
            # collections while numpy and siftbus's modules load cost ~0.01-0.02 CPU-s
            gc.disable()
            from siftbus.cli._matchfiles import fast_command

            try:
                done = fast_command(sys.argv[2:])
            except BrokenPipeError:  # the reader left (`| head`): exit 1 quietly, as click
                _exit_now(1)
            if done:
                raise SystemExit(0)
            gc.enable()
        _typer_main()
    except SystemExit as exc:
        if not exc.code and _exits_at_once():
            _exit_now()
        raise
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


def _typer_main() -> None:
    import typer

    from siftbus.cli._help import polish

    command = typer.main.get_command(_app())
    polish(command)
    command(prog_name="siftbus")


EXIT_AT_ONCE = frozenset({"match"})
"""Commands after which the ``siftbus`` process ends without tearing the interpreter
down (:func:`_exit_now`)."""


def _exits_at_once() -> bool:
    """Whether this process is the ``siftbus`` command (the console script or ``python -m
    siftbus``, not a caller of :func:`main`) running a command of :data:`EXIT_AT_ONCE`."""
    top = sys.modules.get("__main__")
    spec = getattr(top, "__spec__", None)
    script = str(getattr(top, "__file__", "") or "").replace("\\", "/")
    is_command = (spec is not None and spec.name == "siftbus.__main__") or (
        script.endswith("/siftbus") or script.endswith("/siftbus-script.py"))
    return is_command and len(sys.argv) > 1 and sys.argv[1] in EXIT_AT_ONCE


def _exit_now(code: int = 0) -> NoReturn:
    """End the process with ``code`` after a command: exit handlers run and the standard
    streams are flushed, but the interpreter is not torn down (freeing numba's modules
    and a 100,000-profile index object by object, and a last full collection, cost
    ~0.15 CPU-s: half of what a ``json.loads`` loop over 100,000 events costs). A stream
    that cannot be flushed (a closed pipe) makes a success 120, as Python's own exit."""
    import atexit

    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            code = code or 120
    os._exit(code)
