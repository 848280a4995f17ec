"""gate.comparator.dtypes.abs_difference on 0-d arrays (found by bench/compare_kernel.py
--self-check 2000 --seed 11, whose whole-array reference calls it on the unflattened inputs)."""

from __future__ import annotations

import numpy as np


def test_abs_difference_of_zero_dimensional_int64_and_uint64():
    """0-d inputs: the Python-integer subtraction gives a Python int, not an array (it raised
    AttributeError in the self-check's whole-array reference, seed 11)."""
    from gate.comparator.dtypes import abs_difference

    result = abs_difference(np.array(-3, np.int64), np.array(2**63 + 5, np.uint64))
    assert result.shape == () and result.dtype == np.float64 and result == float(2**63 + 8)
