"""``DataLoader`` and ``coerce_feed_dict`` (gate/comparator/data_loader.py).

The loader must give Polygraphy 0.53.6's values for the same seed (spec section 5, case 37), so
Polygraphy's own ``DataLoader`` runs as the oracle. Where we differ on purpose (a None range bound,
errors instead of warnings or numpy exceptions), a test states our value or error.
"""

from __future__ import annotations

import logging
import pickle
from collections import OrderedDict

import numpy as np
import onnx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from onnx import TensorProto, helper, numpy_helper
from polygraphy.common import TensorMetadata as PgTensorMetadata
from polygraphy.comparator import DataLoader as PgDataLoader
from polygraphy.logger import G_LOGGER

from gate.backend.base import TensorMetadata
from gate.backend.onnxrt import OnnxrtRunner, SessionFromOnnx
from gate.comparator import Comparator, DataLoader, coerce_feed_dict
from gate.errors import GateError

G_LOGGER.module_severity = G_LOGGER.CRITICAL

DTYPES = [
    np.float16,
    np.float32,
    np.float64,
    np.int8,
    np.int16,
    np.int32,
    np.int64,
    np.uint8,
    np.uint16,
    np.uint32,
    np.uint64,
    np.bool_,
]


def metadata(*entries):
    """``(name, dtype, shape)`` entries -> (ours, Polygraphy's) metadata."""
    ours, theirs = TensorMetadata(), PgTensorMetadata()
    for name, dtype, shape in entries:
        ours.add(name, dtype, shape)
        theirs.add(name, dtype, shape)
    return ours, theirs


def polygraphy_items(entries, seed=1, iterations=1, val_range=None, user=None):
    loader = PgDataLoader(seed=seed, iterations=iterations, val_range=val_range, input_metadata=user)
    if entries is not None:
        loader.input_metadata = metadata(*entries)[1]
    return [loader[i] for i in range(iterations)]


def assert_same_items(ours, theirs):
    assert len(ours) == len(theirs)
    for a, b in zip(ours, theirs):
        assert list(a) == list(b)
        for name in a:
            assert isinstance(a[name], np.ndarray)
            assert a[name].dtype == b[name].dtype, name
            assert a[name].shape == b[name].shape, name
            np.testing.assert_array_equal(a[name], b[name], strict=True)


TEST_VECTOR = [("f", np.float32, (2, 3)), ("i", np.int32, (2, 3)), ("b", np.bool_, (4,)), ("h", np.float16, (2,))]


class TestSpecTestVector:
    """Spec section 5 / case 37: seed 1, item 0 and item 1's f[0:3]."""

    @pytest.mark.parametrize("implementation", ["ours", "polygraphy"])
    def test_seed_1(self, implementation):
        if implementation == "ours":
            loader = DataLoader(iterations=2, input_metadata=metadata(*TEST_VECTOR)[0])
            items = [loader[0], loader[1]]
        else:
            items = polygraphy_items(TEST_VECTOR, iterations=2)
        item = items[0]
        np.testing.assert_allclose(
            item["f"].ravel(),
            [0.41702199, 0.72032452, 1.1437482e-04, 0.30233258, 0.14675589, 0.09233859],
            rtol=1e-6,
        )
        assert item["f"].dtype == np.float32 and item["f"].shape == (2, 3)
        assert item["i"].ravel().tolist() == [0, 1, 1, 0, 0, 1] and item["i"].dtype == np.int32
        assert item["b"].tolist() == [False, True, False, False] and item["b"].dtype == np.bool_
        assert item["h"].dtype == np.float16 and item["h"].tolist() == [np.float16(0.846), np.float16(0.3132)]
        np.testing.assert_allclose(items[1]["f"].ravel()[:3], [0.4359949, 0.02592623, 0.5496625], rtol=1e-6)

    def test_ours_equals_polygraphy_bit_for_bit(self):
        loader = DataLoader(iterations=3, input_metadata=metadata(*TEST_VECTOR)[0])
        assert_same_items(list(loader), polygraphy_items(TEST_VECTOR, iterations=3))


def range_for(dtype):
    """A (min, max) strategy that both implementations accept for ``dtype``."""
    kind = np.dtype(dtype).kind
    if kind == "b":
        return st.sampled_from([(0, 0), (0, 1), (1, 1), (0.0, 1.0), (0.25, 3), (-2, -1), (False, True)])
    if kind in "iu":
        info = np.iinfo(dtype)
        ints = st.tuples(st.integers(info.min, info.max), st.integers(info.min, info.max)).map(sorted)
        low = -100.0 if kind == "i" else 0.0
        floats = st.tuples(st.floats(low, 100.0), st.floats(low, 100.0)).map(sorted)
        return st.one_of(ints, floats).map(tuple)
    finite = st.floats(-1e4, 1e4, allow_subnormal=False)
    bound = st.one_of(finite, finite, finite, st.sampled_from([float("-inf"), float("inf")]), st.integers(-50, 50))
    return st.tuples(bound, bound).map(lambda pair: tuple(sorted(pair)))


@st.composite
def cases(draw):
    count = draw(st.integers(1, 4))
    dtypes = draw(st.lists(st.sampled_from(DTYPES + [None]), min_size=count, max_size=count))
    shapes = draw(st.lists(st.lists(st.integers(0, 4), max_size=3).map(tuple), min_size=count, max_size=count))
    entries = [(f"in{k}", dtype, shape) for k, (dtype, shape) in enumerate(zip(dtypes, shapes))]
    mode = draw(st.sampled_from(["default", "tuple", "dict"]))
    if mode == "default":
        val_range = None
    elif mode == "tuple":
        # One range for every input: it must fit the narrowest dtype drawn.
        val_range = draw(st.sampled_from([(0, 1), (0.0, 1.0), (0, 5), (1, 100), (0.5, 7.25)]))
        if any(d is not None and np.dtype(d).kind == "b" for d in dtypes):
            val_range = (0, 1)
    else:
        val_range = {}
        for name, dtype, _ in entries:
            if draw(st.booleans()):
                val_range[name] = draw(range_for(np.float64 if dtype is None else dtype))
        if draw(st.booleans()):
            val_range[""] = (0, 1)
    seed = draw(st.integers(0, 2**31))
    return entries, seed, val_range


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cases())
def test_values_equal_polygraphy(case):
    entries, seed, val_range = case
    ours = DataLoader(seed=seed, iterations=2, input_metadata=metadata(*entries)[0], val_range=val_range)
    with np.errstate(all="ignore"):  # float16 overflow and inf * 0 happen in both
        assert_same_items(list(ours), polygraphy_items(entries, seed=seed, iterations=2, val_range=val_range))
    assert ours.shapes_fed == {name: shape for name, _, shape in entries}


class TestDataLoaderProtocol:
    def test_len_iter_getitem(self):
        loader = DataLoader(iterations=3, input_metadata=metadata(("x", np.float32, (2,)))[0])
        assert len(loader) == 3
        items = list(loader)
        assert len(items) == 3
        np.testing.assert_array_equal(loader[2]["x"], items[2]["x"])
        np.testing.assert_array_equal(loader[-1]["x"], items[2]["x"])
        assert not np.array_equal(items[0]["x"], items[1]["x"])
        with pytest.raises(IndexError):
            loader[3]
        with pytest.raises(IndexError):
            loader[-4]

    def test_zero_iterations_and_no_metadata(self):
        assert list(DataLoader(iterations=0, input_metadata=metadata(("x", np.float32, (2,)))[0])) == []
        assert list(DataLoader(iterations=2)) == [OrderedDict(), OrderedDict()]
        assert polygraphy_items(None, iterations=2) == [OrderedDict(), OrderedDict()]

    def test_none_dtype_is_float64(self):
        item = DataLoader(input_metadata={"x": (None, (3,))})[0]
        assert item["x"].dtype == np.float64
        assert_same_items([item], polygraphy_items([("x", None, (3,))]))

    def test_picklable_for_subprocess_runs(self):
        loader = DataLoader(seed=7, iterations=2, input_metadata=metadata(("x", np.int32, (2, 2)))[0])
        clone = pickle.loads(pickle.dumps(loader))
        np.testing.assert_array_equal(clone[1]["x"], loader[1]["x"])

    @pytest.mark.parametrize(
        "kwargs, message",
        [
            ({"seed": -1}, "seed"),
            ({"seed": 1.5}, "seed"),
            ({"iterations": -1}, "iterations"),
            ({"seed": 2**32 - 2, "iterations": 3}, "largest"),
        ],
    )
    def test_bad_seed_or_iterations(self, kwargs, message):
        with pytest.raises(GateError, match=message):
            DataLoader(**kwargs)

    def test_unsupported_dtype(self):
        with pytest.raises(GateError, match="data type: object.*for input: s. Please use a custom data loader"):
            DataLoader(input_metadata={"s": (np.object_, (2,))})[0]


class TestDynamicShapes:
    ENTRIES = [("x", np.float32, ("batch", 3, None)), ("ids", np.int64, (-1,)), ("s", np.float16, (2,))]

    def test_defaults_to_1_with_one_warning_per_dim(self, caplog):
        loader = DataLoader(iterations=3, input_metadata=metadata(*self.ENTRIES)[0])
        assert loader.shapes_fed == {}
        with caplog.at_level(logging.WARNING, logger="gate.comparator"):
            items = list(loader)
        warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
        assert len(warnings) == 3, warnings
        assert "'x'" in warnings[0] and "dim 0 ('batch')" in warnings[0]
        assert "'x'" in warnings[1] and "dim 2 (None)" in warnings[1]
        assert "'ids'" in warnings[2] and "dim 0 (-1)" in warnings[2]
        assert all(r.name == "gate.comparator" for r in caplog.records)
        assert loader.shapes_fed == {"x": (1, 3, 1), "ids": (1,), "s": (2,)}
        assert_same_items(items, polygraphy_items(self.ENTRIES, iterations=3))

    def test_user_shape_wins_without_warning(self, caplog):
        loader = DataLoader(input_metadata=metadata(*self.ENTRIES)[0], input_shapes={"x": (4, 3, 5), "ids": [7]})
        with caplog.at_level(logging.WARNING, logger="gate.comparator"):
            item = loader[0]
        assert not caplog.records
        assert loader.shapes_fed == {"x": (4, 3, 5), "ids": (7,), "s": (2,)}
        user = PgTensorMetadata().add("x", None, (4, 3, 5)).add("ids", None, (7,))
        assert_same_items([item], polygraphy_items(self.ENTRIES, user=user))

    def test_wildcard_user_shape(self):
        loader = DataLoader(input_metadata=metadata(*self.ENTRIES)[0], input_shapes={"[xy]*": (2, 3, 2), "i?s": (5,)})
        loader[0]
        assert loader.shapes_fed == {"x": (2, 3, 2), "ids": (5,), "s": (2,)}

    def test_user_shape_of_static_input_must_match(self):
        loader = DataLoader(input_metadata=metadata(*self.ENTRIES)[0], input_shapes={"x": (4, 2, 5)})
        with pytest.raises(GateError, match=r"input 'x' the shape \(4, 2, 5\).*\(batch, 3, None\)"):
            loader[0]
        loader = DataLoader(input_metadata=metadata(*self.ENTRIES)[0], input_shapes={"x": (4, 3)})
        with pytest.raises(GateError, match="input 'x'"):
            loader[0]

    def test_user_name_that_matches_no_input_is_an_error(self):
        loader = DataLoader(input_metadata=metadata(*self.ENTRIES)[0], input_shapes={"input_ids": (4,)})
        with pytest.raises(GateError, match=r"\['input_ids'\] match no model input.*\['x', 'ids', 's'\]"):
            loader[0]

    @pytest.mark.parametrize("shape", [(-1, 3), ("batch",), None, "12", (1.5,)])
    def test_user_shape_must_be_static(self, shape):
        with pytest.raises(GateError, match=r"input_shapes\['x'\]"):
            DataLoader(input_shapes={"x": shape})

    def test_user_shapes_without_runner_metadata(self):
        loader = DataLoader(iterations=2, input_shapes={"a": (2, 2), "b": (3,)})
        items = list(loader)
        assert items[0]["a"].dtype == np.float64 and loader.shapes_fed == {"a": (2, 2), "b": (3,)}
        user = PgTensorMetadata().add("a", None, (2, 2)).add("b", None, (3,))
        assert_same_items(items, polygraphy_items(None, iterations=2, user=user))

    def test_unknown_rank_needs_a_user_shape(self):
        with pytest.raises(GateError, match="'x' has an unknown rank"):
            DataLoader(input_metadata={"x": (np.float32, None)})[0]
        loader = DataLoader(input_metadata={"x": (np.float32, None)}, input_shapes={"x": (2, 2)})
        assert loader[0]["x"].shape == (2, 2)


class TestShapeTensorGuess:
    ENTRIES = [("shape", np.int64, (3,)), ("x", np.float32, ("n", 2))]

    def test_user_shape_becomes_the_values(self):
        loader = DataLoader(input_metadata=metadata(*self.ENTRIES)[0], input_shapes={"shape": (2, 5, 7)})
        item = loader[0]
        assert item["shape"].tolist() == [2, 5, 7] and item["shape"].dtype == np.int64
        assert loader.shapes_fed["shape"] == (3,)
        user = PgTensorMetadata().add("shape", None, (2, 5, 7))
        assert_same_items([item], polygraphy_items(self.ENTRIES, user=user))

    def test_one_element_input_quirk(self):
        # Polygraphy's guess also fires when the user "shape" is a valid override: (1,) for an
        # int input of shape (1,) gives the value [1], not a random draw.
        entries = [("k", np.int32, (1,)), ("x", np.float32, (2,))]
        item = DataLoader(input_metadata=metadata(*entries)[0], input_shapes={"k": (1,)})[0]
        assert item["k"].tolist() == [1] and item["k"].dtype == np.int32
        user = PgTensorMetadata().add("k", None, (1,))
        assert_same_items([item], polygraphy_items(entries, user=user))

    def test_not_for_floats_or_dynamic_inputs(self):
        for entries in ([("s", np.float32, (3,))], [("s", np.int64, ("n",))]):
            loader = DataLoader(input_metadata=metadata(*entries)[0], input_shapes={"s": (2, 5, 7)})
            with pytest.raises(GateError, match="input 's'"):
                loader[0]

    def test_values_that_do_not_fit_the_dtype(self):
        entries = [("s", np.int8, (2,))]
        with pytest.raises(GateError, match="shape-tensor input 's'.*int8"):
            DataLoader(input_metadata=metadata(*entries)[0], input_shapes={"s": (300, 2)})[0]


class TestValRange:
    def test_per_input_ranges_with_default(self):
        entries = [("input_ids", np.int64, (4, 16)), ("mask", np.int64, (4, 16)), ("x", np.float32, (8,))]
        val_range = {"input_ids": (0, 30521), "": (0.0, 1.0), "x": (-2.0, 2.0)}
        loader = DataLoader(iterations=2, input_metadata=metadata(*entries)[0], val_range=val_range)
        items = list(loader)
        ids = np.concatenate([item["input_ids"].ravel() for item in items])
        assert ids.min() >= 0 and ids.max() <= 30521 and len(np.unique(ids)) > 100
        assert set(np.unique(items[0]["mask"])) <= {0, 1}
        assert items[0]["x"].min() >= -2.0 and items[0]["x"].max() < 2.0
        assert_same_items(items, polygraphy_items(entries, iterations=2, val_range=val_range))

    def test_none_bound_falls_back_to_the_default(self):
        # Deviation: Polygraphy documents this but raises TypeError (spec section 5, quirks).
        entries = [("x", np.float32, (5,)), ("i", np.int32, (5,))]
        ours = DataLoader(input_metadata=metadata(*entries)[0], val_range=(None, 3))[0]
        with pytest.raises(TypeError):
            polygraphy_items(entries, val_range=(None, 3))
        assert_same_items([ours], polygraphy_items(entries, val_range=(0.0, 3)))
        # In a dict, a None bound takes the "" entry's bound, else the default's.
        ours = DataLoader(input_metadata=metadata(*entries)[0], val_range={"": (-1, 4), "i": (None, 9), "x": None})[0]
        assert_same_items([ours], polygraphy_items(entries, val_range={"": (-1, 4), "i": (-1, 9)}))

    @pytest.mark.parametrize(
        "val_range, message",
        [
            ({"input_ids": (5, 0)}, r"val_range for input 'input_ids' is \[5, 0\]: its min is greater than its max"),
            ({"input_ids": ("0", 5)}, r"input 'input_ids' has a non-numeric bound '0'"),
            ({"input_ids": (0, float("nan"))}, "input 'input_ids' has a NaN bound"),
            ({"input_ids": (0, 1, 2)}, "input 'input_ids' is .*expected a \\(min, max\\) pair"),
            ({"": (1, 0)}, "val_range for '' \\(the default\\)"),
            ({"": (-1, 4), "x": (5, None)}, r"input 'x' is \[5, 4\]"),
            ((2.0, 1.0), r"val_range is \[2.0, 1.0\]"),
            ("0,1", "expected a \\(min, max\\) pair or a dict"),
            ({3: (0, 1)}, "key 3"),
        ],
    )
    def test_invalid_range_at_construction(self, val_range, message):
        with pytest.raises(GateError, match=message):
            DataLoader(val_range=val_range)

    def test_integer_range_must_fit_the_dtype(self):
        loader = DataLoader(input_metadata={"ids": (np.uint8, (2,))}, val_range={"ids": (0, 300)})
        with pytest.raises(GateError, match=r"\[0, 300\] for input 'ids' does not fit its dtype uint8 \(\[0, 255\]\)"):
            loader[0]
        loader = DataLoader(input_metadata={"ids": (np.int32, (2,))}, val_range=(0, float("inf")))
        with pytest.raises(GateError, match="integer input 'ids' has an infinite bound"):
            loader[0]

    def test_bool_range_empty_once_cast(self):
        loader = DataLoader(input_metadata={"m": (np.bool_, (2,))}, val_range=(-1, 0))
        with pytest.raises(GateError, match="bool input 'm' is empty"):
            loader[0]
        assert DataLoader(input_metadata={"m": (np.bool_, (3,))}, val_range=(1, 2))[0]["m"].tolist() == [True] * 3

    def test_unused_range_name_warns_once(self, caplog):
        loader = DataLoader(iterations=3, input_metadata={"x": (np.float32, (2,))}, val_range={"y": (0, 5)})
        with caplog.at_level(logging.WARNING, logger="gate.comparator"):
            list(loader)
        assert [r.getMessage() for r in caplog.records] == [
            "val_range names ['y'] match no model input; the model's inputs are ['x']."
        ]

    def test_infinite_float_bounds_match_polygraphy(self):
        entries = [("x", np.float32, (16,))]
        for val_range in ((float("-inf"), float("inf")), (0, float("inf")), (float("-inf"), 0)):
            with np.errstate(all="ignore"):
                ours = DataLoader(input_metadata=metadata(*entries)[0], val_range=val_range)[0]
                assert_same_items([ours], polygraphy_items(entries, val_range=val_range))


class TestCoerceFeedDict:
    META = TensorMetadata().add("ids", np.int32, ("batch", 4)).add("x", np.float32, (2,))

    def test_exact_feed_passes_through_uncopied(self):
        feed = {"x": np.zeros(2, np.float32), "ids": np.zeros((3, 4), np.int32)}
        out = coerce_feed_dict(feed, self.META)
        assert list(out) == ["ids", "x"] and isinstance(out, OrderedDict)
        assert out["ids"] is feed["ids"] and out["x"] is feed["x"]

    def test_lossless_cast(self):
        feed = {"ids": np.array([[1, 2, -3, 2**31 - 1]], np.int64), "x": np.array([0.5, -np.inf])}
        out = coerce_feed_dict(feed, self.META)
        assert out["ids"].dtype == np.int32 and out["ids"].tolist() == [[1, 2, -3, 2**31 - 1]]
        assert out["x"].dtype == np.float32 and out["x"].tolist() == [0.5, -np.inf]
        nan = coerce_feed_dict({"ids": np.zeros((1, 4), np.uint8), "x": np.array([np.nan, 3.0])}, self.META)
        assert np.isnan(nan["x"][0]) and nan["ids"].dtype == np.int32

    @pytest.mark.parametrize(
        "feed, message",
        [
            (
                {"ids": np.array([[1, 2, 3_000_000_000, 4]], np.int64), "x": np.zeros(2, np.float32)},
                r"'ids' has dtype int64 and the model expects int32.*\(e.g. 3000000000\)",
            ),
            (
                {"ids": np.zeros((1, 4), np.int32), "x": np.array([0.5, 0.1])},
                r"'x' has dtype float64 and the model expects float32.*\(e.g. 0.1\)",
            ),
            (
                {"ids": np.array([[0, 1, 2.5, 3]]), "x": np.zeros(2, np.float32)},
                r"'ids' has dtype float64 and the model expects int32.*\(e.g. 2.5\)",
            ),
            (
                {"ids": np.array([[0, 1, 2, 2**31]], np.uint64), "x": np.zeros(2, np.float32)},
                r"'ids' has dtype uint64 .*\(e.g. 2147483648\)",
            ),
            (
                {"ids": np.zeros((1, 4), np.int32), "x": np.array([2**24 + 1, 1], np.int64)},
                r"'x' has dtype int64 .*float32.*\(e.g. 16777217\)",
            ),
            (
                {"ids": np.zeros((1, 4), np.int32), "x": np.array([1e6, 1], np.float64)},
                None,
            ),
        ],
    )
    def test_lossy_cast_is_an_error_with_the_value(self, feed, message):
        if message is None:  # 1e6 is exact in float32: no error
            assert coerce_feed_dict(feed, self.META)["x"].tolist() == [1e6, 1]
            return
        with pytest.raises(GateError, match=message):
            coerce_feed_dict(feed, self.META)

    def test_lossy_cast_to_float16_and_bool(self):
        meta = TensorMetadata().add("h", np.float16, (2,)).add("m", np.bool_, (2,))
        with pytest.raises(GateError, match=r"'h'.*float16.*\(e.g. 70000.0\)"):
            coerce_feed_dict({"h": np.array([1.0, 70000.0], np.float32), "m": np.array([True, False])}, meta)
        with pytest.raises(GateError, match=r"'m' has dtype int64.*bool.*\(e.g. 2\)"):
            coerce_feed_dict({"h": np.zeros(2, np.float16), "m": np.array([0, 2])}, meta)
        out = coerce_feed_dict({"h": np.array([1.5, np.inf]), "m": np.array([1, 0])}, meta)
        assert out["h"].dtype == np.float16 and out["m"].tolist() == [True, False]

    def test_missing_input_names_it_and_lists_the_feed(self):
        with pytest.raises(GateError, match=r"Input 'ids' is missing from the feed_dict, which has \['IDS', 'x'\]"):
            coerce_feed_dict({"IDS": np.zeros((1, 4), np.int32), "x": np.zeros(2, np.float32)}, self.META)

    def test_bad_shape_names_both_shapes(self):
        feed = {"ids": np.zeros((4, 1), np.int32), "x": np.zeros(2, np.float32)}
        with pytest.raises(GateError, match=r"'ids' has shape \(4, 1\).*model's \(batch, 4\)"):
            coerce_feed_dict(feed, self.META)
        feed = {"ids": np.zeros((1, 4), np.int32), "x": np.zeros((1, 2), np.float32)}
        with pytest.raises(GateError, match=r"'x' has shape \(1, 2\).*model's \(2,\)"):
            coerce_feed_dict(feed, self.META)

    def test_extra_inputs_dropped_with_one_warning(self, caplog):
        feed = {"extra": np.ones(1), "ids": np.zeros((2, 4), np.int32), "x": np.zeros(2, np.float32), "more": 1}
        with caplog.at_level(logging.WARNING, logger="gate.comparator"):
            out = coerce_feed_dict(feed, self.META)
        assert list(out) == ["ids", "x"]
        assert len(caplog.records) == 1 and "['extra', 'more']" in caplog.records[0].getMessage()

    def test_loader_items_need_no_coercion(self):
        item = DataLoader(input_metadata=self.META, input_shapes={"ids": (3, 4)})[0]
        out = coerce_feed_dict(item, self.META)
        assert all(out[name] is item[name] for name in item)


def make_gather_model(path):
    """y = x + table[ids], a real ONNX model with a dynamic batch dim: x float32 [batch, 4],
    ids int64 [batch] (indices into a 10-row table)."""
    table = np.arange(40, dtype=np.float32).reshape(10, 4)
    graph = helper.make_graph(
        [
            helper.make_node("Gather", ["table", "ids"], ["rows"], axis=0),
            helper.make_node("Add", ["x", "rows"], ["y"]),
        ],
        "gather",
        [
            helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 4]),
            helper.make_tensor_value_info("ids", TensorProto.INT64, ["batch"]),
        ],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 4])],
        [numpy_helper.from_array(table, "table")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    onnx.save(model, str(path))
    return table


class TestComparatorIntegration:
    def test_streaming_run_sets_metadata_from_the_first_runner(self, tmp_path, caplog):
        path = tmp_path / "gather.onnx"
        table = make_gather_model(path)
        loader = DataLoader(iterations=3, val_range={"ids": (0, 9)})
        runners = [
            OnnxrtRunner(SessionFromOnnx(path), name="ort-all"),
            OnnxrtRunner(SessionFromOnnx(path, graph_optimization_level="disable"), name="ort-none"),
        ]
        with caplog.at_level(logging.WARNING, logger="gate.comparator"):
            stream = Comparator.run(runners, data_loader=loader, streaming=True)
            outputs = []
            for run in stream:
                assert run.keys() == ["ort-all", "ort-none"]
                outputs.append({name: iters[0]["y"].copy() for name, iters in run.items()})
        assert len(outputs) == 3
        assert list(loader.input_metadata) == ["x", "ids"]
        assert loader.shapes_fed == {"x": (1, 4), "ids": (1,)}
        dims = [r.getMessage() for r in caplog.records if "is dynamic" in r.getMessage()]
        assert len(dims) == 2 and "'x'" in dims[0] and "'ids'" in dims[1]
        for index, out in enumerate(outputs):
            feed = loader[index]
            expected = feed["x"] + table[feed["ids"]]
            np.testing.assert_array_equal(out["ort-all"], expected)
            np.testing.assert_array_equal(out["ort-none"], expected)
        assert outputs[0]["ort-all"].tolist() != outputs[1]["ort-all"].tolist()

    def test_streaming_compare_accuracy_passes(self, tmp_path):
        path = tmp_path / "gather.onnx"
        make_gather_model(path)
        runners = [OnnxrtRunner(SessionFromOnnx(path), name="a"), OnnxrtRunner(SessionFromOnnx(path), name="b")]
        loader = DataLoader(iterations=3, val_range={"ids": (0, 9)}, input_shapes={"x": (5, 4), "ids": (5,)})
        accuracy = Comparator.compare_accuracy(Comparator.run(runners, data_loader=loader, streaming=True))
        assert bool(accuracy) and accuracy[0].stats(("a", "b")) == (3, 0, 3)
        assert loader.shapes_fed == {"x": (5, 4), "ids": (5,)}
