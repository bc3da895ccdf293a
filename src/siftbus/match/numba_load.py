"""numba's ``njit`` and ``typeof``, imported and loaded from its cache at the cost of
what is used.

Every compiled module of siftbus takes ``njit`` from here, so that this module is what
imports numba, before any kernel loads. Fixed costs of a process that runs cached
kernels are left out (``siftbus match`` at 100,000 x 100,000 spent ~0.16 CPU-s on them,
more than half of what a ``json.loads`` loop over the same events costs):

* **The context refresh before a cache load** (~0.1 CPU-s). Every ``cache=True`` kernel
  is compiled once per machine and then loaded from numba's cache, and before loading
  one numba refreshes the whole target context (``Cache.load_overload`` calls
  ``target_context.refresh()``): it imports and installs every lowering and typing
  registry numba has (linear algebra, random generators, polynomials, typed containers,
  jitclass, datetimes...) and scans the installed distributions for numba extensions.
  A cached library is machine code linked against numba's runtime (NRT) only, so
  :func:`install` makes a cache load initialise just the runtime. The refresh still
  happens wherever numba needs it: the compiler refreshes both contexts itself before
  it compiles anything (``CompilerBase.__init__``), which a cache miss goes to, and the
  target context refreshes on a missing lowering (``get_function``).
* **Imports for features siftbus does not use** (~0.06 CPU-s): the modules of the numba
  functions a cached kernel inlined, imported for their environments
  (:func:`_environments_without_imports`); and, while numba is imported, PyYAML, which
  numba's configuration uses only to read a ``.numba_config.yaml`` in the working
  directory (so it is left out only when there is none), and ``importlib.metadata``
  (with ``email``), which numba uses only to look for extensions when it compiles (so
  it is loaded lazily, at its first use, when the process has one thread: Python 3.11's
  lazy loader has no lock of its own).
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import sys
import threading
from typing import Any


def _import_numba() -> None:
    if "numba" in sys.modules:
        return
    no_yaml = "yaml" not in sys.modules and not os.path.isfile(".numba_config.yaml")
    if no_yaml:
        sys.modules["yaml"] = None  # type: ignore[assignment]  # "import yaml" fails
    if "importlib.metadata" not in sys.modules and threading.active_count() == 1:
        spec = importlib.util.find_spec("importlib.metadata")
        if spec is not None and spec.loader is not None:
            spec.loader = importlib.util.LazyLoader(spec.loader)
            lazy = importlib.util.module_from_spec(spec)
            sys.modules["importlib.metadata"] = lazy
            spec.loader.exec_module(lazy)
            importlib.metadata = lazy
    try:
        import numba  # noqa: F401
    finally:
        if no_yaml and sys.modules.get("yaml", 0) is None:
            del sys.modules["yaml"]


_import_numba()

from numba import njit as _njit  # noqa: E402
from numba import typeof as typeof  # noqa: E402
from numba.core import caching  # noqa: E402
from numba.core.dispatcher import Dispatcher  # noqa: E402


def njit(*args: Any, **options: Any) -> Any:
    """numba's ``njit`` (with or without options), whose dispatchers skip numba's
    extension scan before their first call (:func:`_no_extensions`)."""
    made = _njit(*args, **options)
    if isinstance(made, Dispatcher):
        return _no_extensions(made)
    return lambda fn: _no_extensions(made(fn))


def _no_extensions(dispatcher: Dispatcher) -> Dispatcher:
    """``dispatcher`` without the scan for numba extensions (``entrypoints.init_all``)
    before its first call: it exists for arguments of types an extension defines, and a
    siftbus kernel takes numpy arrays and numbers only. When it compiles, the target
    context's refresh scans for them anyway (``CPUContext.load_additional_registries``)."""
    dispatcher._compilation_chain_init_hook = _nothing  # type: ignore[attr-defined]
    return dispatcher


def _nothing() -> None:
    pass


def install() -> None:
    """Make numba's cache load a kernel without refreshing the target context (once)."""
    cache = caching.Cache
    if getattr(cache.load_overload, "_siftbus", False):
        return

    def load_overload(self: Any, sig: Any, target_context: Any) -> Any:
        from numba.core.runtime import nrt

        nrt.rtsys.initialize(target_context)  # what cached machine code links against
        with self._guard_against_spurious_io_errors():
            return self._load_overload(sig, target_context)

    load_overload._siftbus = True  # type: ignore[attr-defined]
    cache.load_overload = load_overload  # type: ignore[method-assign]
    _environments_without_imports()


def _environments_without_imports() -> None:
    """A cached kernel refers to the environments of the numba functions it inlined
    (``np.empty``'s is in ``numba.np.arrayobj``), and numba rebuilds each one from its
    module's globals, importing the module: ``numba.np.arrayobj`` and what it imports
    cost ~0.03 CPU-s. An environment's globals are read by object-mode code only (its
    constants, set here as numba sets them, serve compiled code), so the environment of
    a module not imported yet gets its name alone."""
    from numba.core import environment

    full = environment._rebuild_env

    def _rebuild_env(modname: str, consts: Any, env_name: str) -> Any:
        if modname in sys.modules:
            return full(modname, consts, env_name)
        env = environment.lookup_environment(env_name)
        if env is not None:
            return env
        env = environment.Environment({"__name__": modname})
        env.consts[:] = consts
        env.env_name = env_name
        environment.Environment._memo[env_name] = env
        return env

    # pickled by name, as numba's own (an environment saved again names this function)
    _rebuild_env.__module__ = full.__module__
    _rebuild_env.__qualname__ = full.__qualname__
    environment._rebuild_env = _rebuild_env


install()
