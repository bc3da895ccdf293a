"""Loading numba in the background (``kernel.load_in_background``, issue 30 item 5): the
Python kernels serve until the load is done, then the process switches; a failed load
or warm-up leaves it on the Python kernels; :func:`kernel.use` during a load wins."""

from __future__ import annotations

import threading

import pytest

from siftbus.match import kernel


@pytest.fixture(autouse=True)
def _auto() -> object:
    kernel.use("auto")
    yield
    kernel.use()


def test_the_process_switches_only_when_the_warm_up_is_done() -> None:
    seen: list[str] = []
    release = threading.Event()

    def warm() -> None:
        seen.append(kernel.name())  # this thread is on numba
        release.wait(20)

    thread = kernel.load_in_background(warm)
    assert thread is not None
    assert kernel.load_in_background(warm) is None  # one load at a time
    assert kernel.name() == "python"
    # the auto rule does not load numba here meanwhile, however much it is wanted
    kernel.STATE.spent = 10 * kernel.AUTO_BUDGET
    assert not kernel.compiled_for(10 * kernel.AUTO_BYTES)
    assert kernel.name() == "python"
    release.set()
    thread.join(30)
    assert seen == ["numba"]
    assert kernel.name() == "numba"
    assert kernel.load_in_background(warm) is None  # nothing left to load


def test_a_failed_warm_up_leaves_the_python_kernels() -> None:
    def warm() -> None:
        raise RuntimeError("a bug in the warm-up")

    thread = kernel.load_in_background(warm)
    assert thread is not None
    thread.join(30)
    assert kernel.name() == "python"
    assert kernel.STATE.loading == 0  # the auto rule may load numba itself again


def test_a_choice_made_during_the_load_wins() -> None:
    release = threading.Event()
    thread = kernel.load_in_background(lambda: release.wait(20))
    assert thread is not None
    kernel.use("python")
    release.set()
    thread.join(30)
    assert kernel.name() == "python"


def test_nothing_to_load_outside_auto() -> None:
    kernel.use("python")
    assert kernel.load_in_background(lambda: None) is None


def test_a_server_loads_numba_in_a_thread_when_it_is_wanted() -> None:
    release = threading.Event()
    warmed: list[str] = []

    def warm() -> None:
        warmed.append(threading.current_thread().name)
        release.wait(20)

    kernel.load_later(warm)
    assert kernel.name() == "python" and not kernel.STATE.loading  # nothing wanted yet
    kernel.STATE.spent = 10 * kernel.AUTO_BUDGET
    assert not kernel.compiled_for(10 * kernel.AUTO_BYTES)  # wanted: a thread loads it
    assert kernel.name() == "python" and kernel.STATE.loading
    release.set()
    for t in threading.enumerate():
        if t.name == "siftbus-kernels":
            t.join(30)
    assert warmed == ["siftbus-kernels"]
    assert kernel.name() == "numba"


def test_after_a_failed_background_load_the_auto_rule_loads_as_before() -> None:
    def warm() -> None:
        raise RuntimeError("a bug in the warm-up")

    kernel.load_later(warm)
    kernel.STATE.spent = 10 * kernel.AUTO_BUDGET
    kernel.compiled_for(10 * kernel.AUTO_BYTES)
    for t in threading.enumerate():
        if t.name == "siftbus-kernels":
            t.join(30)
    assert kernel.name() == "python" and kernel.STATE.later is None
    assert kernel.compiled_for(10 * kernel.AUTO_BYTES)  # in this thread, at once
    assert kernel.name() == "numba"
