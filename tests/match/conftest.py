"""Shared fixtures for the matcher tests: the kernels (numba and pure Python) as a
parameter, so that the same conformance suite runs on both implementations."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from siftbus.match import kernel


@pytest.fixture(params=["numba", "python"])
def kernels(request: pytest.FixtureRequest) -> Iterator[str]:
    """Run the test with one kernel implementation, then go back to the default."""
    kernel.use(request.param)
    try:
        yield request.param
    finally:
        kernel.use()
