"""The gate's rules per output dtype: which outputs are compared under tolerances and which exactly.

A float tolerance means nothing for a token id, a class index, a mask or a string: 14523 against
14524 is within ``rtol = 1e-4``, and two different strings were within ``atol = 1``. So the gate
(not the Polygraphy-compatible ``SimpleCompareFunc``, whose defaults stay Polygraphy's) compares:

- float outputs (float16/32/64, ml_dtypes' float8 / bfloat16, or a float on either side) under the
  configured tolerances, default or per output;
- integer and bool outputs (both sides; ml_dtypes' int4 too) **exactly** (``EXACT``: every element
  equal; the report says ``exact`` and shows the first differing element), unless the output has a
  tolerance of its own (a per-output ``atol`` or ``rtol`` entry from gate.toml, a flag or an action
  input): the default tolerance applies to float outputs only;
- string and other object outputs always exactly; a tolerance of their own is an error naming the
  output (it cannot mean anything).
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from gate.comparator.compare import EXACT, SimpleCompareFunc, SimpleThreshold
from gate.comparator.dtypes import widened_dtype
from gate.errors import GateError

FLOAT, DISCRETE, TEXT = "float", "discrete", "text"


def value_kind(dtype) -> str:
    """``float``, ``discrete`` (integer or bool, ml_dtypes' int4 included) or ``text`` (strings,
    bytes, objects) for a numpy dtype."""
    dtype = np.dtype(dtype)
    if dtype.kind in "OSUV" and widened_dtype(dtype) == dtype:
        return TEXT
    kind = widened_dtype(dtype).kind
    return DISCRETE if kind in "biu" else FLOAT if kind in "fc" else TEXT


class GateCompareFunc(SimpleCompareFunc):
    """``SimpleCompareFunc`` with the gate's per-dtype rules (see the module docstring).

    Args:
        source: what per-output tolerances come from, for the error message (e.g. the config
            file's path).
        The other arguments are ``SimpleCompareFunc``'s.

    Raises (when called):
        GateError: a string or object output with a tolerance of its own, naming the output.
    """

    def __init__(self, *args, source: str = "gate.toml", **kwargs):
        super().__init__(*args, **kwargs)
        self.source = source

    def own_tolerance(self, name: str) -> list[str]:
        """The tolerance settings (``atol``, ``rtol``) that have an entry for output ``name``."""
        return [
            label
            for label, value in (("atol", self.atol), ("rtol", self.rtol))
            if isinstance(value, dict) and name in value
        ]

    def threshold_for_output(self, name: str, array0, array1) -> SimpleThreshold:
        kinds = {value_kind(np.asarray(array0).dtype), value_kind(np.asarray(array1).dtype)}
        own = self.own_tolerance(name)
        if TEXT in kinds:
            if own:
                dtype = next(
                    str(np.asarray(a).dtype) for a in (array0, array1) if value_kind(np.asarray(a).dtype) == TEXT
                )
                raise GateError(
                    f"output '{name}' holds {dtype} values, which are always compared exactly, but {own[0]} gives "
                    f"it a tolerance of its own ({self.source}, --{own[0]} or the action input {own[0]}); "
                    "remove that entry."
                )
            return self._exact(name)
        if kinds == {DISCRETE} and not own:
            return self._exact(name)
        return self.thresholds_for(name)

    def _exact(self, name: str) -> SimpleThreshold:
        # The configured statistic's name stays (reports, baselines and check_average see the same
        # statistic as before); the verdict is exactness whatever it is.
        return replace(EXACT, check_error_stat=self.thresholds_for(name).check_error_stat)


# --- golden outputs must be stored in the runner's dtype (the README: could not evaluate otherwise) ---


def dtypes_differ(dtypes) -> bool:
    """``dtypes`` (the output's, the reference's; None: unknown) differ, byte order aside (``>f4`` is float32)."""
    if not dtypes:
        return False
    try:
        return np.dtype(dtypes[0]).newbyteorder("=") != np.dtype(dtypes[1]).newbyteorder("=")
    except TypeError:  # a name numpy does not know: compare the names
        return dtypes[0] != dtypes[1]


def dtype_error(pair, dtypes) -> str:
    """Why an output whose golden dtype differs from the runner's could not be compared."""
    return (
        f"is {dtypes[1]} in the golden outputs but {pair[0]} produces {dtypes[0]}; "
        "store golden outputs in the model's dtype (re-run 'accuracy-gate record')"
    )


def iteration_error(pair, samples) -> tuple[int, str, tuple | None] | None:
    """The first iteration of ``samples`` (``[(position, result)]``, one output of one runner pair)
    that makes the output could-not-compare, as ``(position, error, dtypes)``: the comparator's error
    (e.g. a shape mismatch; dtypes None, as before), else the first iteration whose golden dtype
    differs from the runner's (its dtypes, output's first).
    Every iteration is checked, not only the worst: a golden file of another dtype fails wherever it is.
    None when every iteration could be compared."""
    for position, result in samples:
        if getattr(result, "error", None):
            return position, result.error, None
    for position, result in samples:
        dtypes = getattr(result, "dtypes", None)
        if dtypes_differ(dtypes):
            return position, dtype_error(pair, dtypes), tuple(dtypes)
    return None
