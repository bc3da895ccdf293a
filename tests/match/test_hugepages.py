"""Index arrays in huge pages: the same arrays as numpy's, whatever the pages."""

from __future__ import annotations

import gc
import pickle

import numpy as np
import pytest

from siftbus.match import hugepages


@pytest.mark.parametrize("shape", [(300_000, 8), 2_000_000, (3, 1_000_000), 10, (0, 8)])
@pytest.mark.parametrize("dtype", [np.int16, np.int32, np.uint64])
def test_arrays_behave_like_numpy_ones(shape: int | tuple[int, ...], dtype: type) -> None:
    z = hugepages.zeros(shape, dtype)
    want = np.zeros(shape, dtype)
    assert z.shape == want.shape and z.dtype == want.dtype and z.flags.writeable
    assert z.flags.c_contiguous and not z.any()
    e = hugepages.empty(shape, dtype)
    assert e.shape == want.shape and e.dtype == want.dtype
    e[...] = np.arange(e.size, dtype=np.int64).astype(dtype).reshape(e.shape)
    back = pickle.loads(pickle.dumps(e))
    assert back.shape == e.shape and (back == e).all()
    if e.nbytes >= hugepages.MIN_BYTES and hugepages._ADVICE is not None:
        assert e.__array_interface__["data"][0] % hugepages.HUGE == 0  # aligned
    del e, back, z
    gc.collect()


def test_small_arrays_are_ordinary() -> None:
    a = hugepages.empty(100, np.int32)
    assert a.base is None  # np.empty's own memory, no mapping behind it
