"""L2 / cosine / PSNR / SNR and indices compare functions: Polygraphy 0.53.6's conformance cases
17-21, 24-26 and 31 (shared/spec section 8.2) against our implementation and Polygraphy itself, a
property test that our metrics equal Polygraphy's, and the deliberate differences (D4, D5, D8 and
integer arithmetic without wraparound)."""

from __future__ import annotations

import math
from collections import OrderedDict

import numpy as np
import onnx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
from onnx import TensorProto, helper, numpy_helper
from polygraphy.comparator import Comparator as PgComparator
from polygraphy.comparator import RunResults as PgRunResults
from polygraphy.comparator import compare as pg
from polygraphy.comparator import struct as pg_struct
from polygraphy.logger import G_LOGGER

from gate.backend.onnxrt import OnnxrtRunner, SessionFromOnnx
from gate.comparator import (
    Comparator,
    CosineSimilarityCompareFunc,
    IndicesCompareFunc,
    IterationResult,
    L2CompareFunc,
    L2Result,
    L2Threshold,
    PsnrCompareFunc,
    RunResults,
    SimpleCompareFunc,
    SnrCompareFunc,
)
from gate.errors import GateError

G_LOGGER.module_severity = G_LOGGER.CRITICAL  # Polygraphy's per-output log lines are noise here
F32 = np.float32

# (our func, Polygraphy's func, metric field)
METRICS = [
    (L2CompareFunc, pg.L2CompareFunc, "l2_norm"),
    (CosineSimilarityCompareFunc, pg.CosineSimilarityCompareFunc, "cosine_similarity"),
    (PsnrCompareFunc, pg.PsnrCompareFunc, "psnr"),
    (SnrCompareFunc, pg.SnrCompareFunc, "snr"),
]


def it(runner, **outputs):
    return IterationResult(OrderedDict((k, np.asarray(v)) for k, v in outputs.items()), runner_name=runner)


def ours(func, a, b):
    return func(it("a", y=a), it("b", y=b))["y"]


def theirs(func, a, b):
    a_it = pg_struct.IterationResult({"y": np.asarray(a)}, runner_name="a")
    b_it = pg_struct.IterationResult({"y": np.asarray(b)}, runner_name="b")
    return func(a_it, b_it)["y"]


def same(x, y):
    return x == y or (math.isnan(x) and math.isnan(y))


class TestConformanceCases:
    @pytest.mark.parametrize(
        ("a", "b", "tolerance", "expected"),
        [
            ([1, 0, 2, 3], [0, 1, 2, 3], 0, False),
            ([1, 0, 2, 3], [0, 1, 2, 3], 1, True),
            ([1, 0, 2, 7], [0, 1, 2, 3], 1, True),  # the last `tolerance` entries are not checked
            ([0, 1, 2, 3, 4, 5, 6], [0, 3, 2, 1, 4, 5, 6], 1, False),
            ([0, 1, 2, 3, 4, 5, 6], [0, 3, 2, 1, 4, 5, 6], 2, True),
        ],
    )
    def test_case17_indices_tolerance(self, a, b, tolerance, expected):
        result = ours(IndicesCompareFunc(index_tolerance=tolerance), a, b)
        assert bool(result) is expected
        assert theirs(pg.IndicesCompareFunc(index_tolerance=tolerance), a, b) is expected
        assert result.mismatch_count == (0 if expected else 2) and result.index_tolerance == tolerance

    def test_case18_l2(self):
        a, b = np.array([1, 0], F32), np.array([0, 1], F32)
        r, p = ours(L2CompareFunc(), a, b), theirs(pg.L2CompareFunc(), a, b)
        assert r.l2_norm == p.l2_norm == pytest.approx(1.4142136, rel=1e-7)
        assert not r and not p
        assert ours(L2CompareFunc(l2_threshold=2), a, b) and theirs(pg.L2CompareFunc(l2_threshold=2), a, b)

    @pytest.mark.parametrize(
        ("a", "b", "value", "expected"),
        [([3, 4], [4, 3], 0.96, False), ([0, 0], [0, 0], 1.0, True), ([0, 0], [1, 2], 0.0, False)],
    )
    def test_case19_cosine(self, a, b, value, expected):
        r = ours(CosineSimilarityCompareFunc(), np.array(a, F32), np.array(b, F32))
        p = theirs(pg.CosineSimilarityCompareFunc(), np.array(a, F32), np.array(b, F32))
        assert r.cosine_similarity == p.cosine_similarity == pytest.approx(value, rel=1e-15)
        assert bool(r) is bool(p) is expected

    def test_case19_cosine_nan_fails(self):
        a, b = np.array([np.inf, 1, 2], F32), np.array([1, 2, 3], F32)
        with np.errstate(invalid="ignore"):
            r, p = ours(CosineSimilarityCompareFunc(), a, b), theirs(pg.CosineSimilarityCompareFunc(), a, b)
        assert math.isnan(r.cosine_similarity) and math.isnan(p.cosine_similarity) and not r and not p

    def test_case20_psnr_first_runner_is_the_reference(self):
        a, b = np.array([1, 2, 3], F32), np.array([1.1, 2.1, 3.1], F32)
        r, p = ours(PsnrCompareFunc(), a, b), theirs(pg.PsnrCompareFunc(), a, b)
        assert r.psnr == p.psnr == pytest.approx(29.5424, abs=5e-5)
        assert not r and not p  # 29.54 dB < 30 dB
        assert ours(PsnrCompareFunc(), b, a).psnr != r.psnr  # the peak comes from the first runner
        identical = ours(PsnrCompareFunc(), a, a.copy())
        assert identical.psnr == math.inf and identical

    def test_case21_snr(self):
        a, b = np.array([1, 2, 3], F32), np.array([1.1, 2.1, 3.1], F32)
        r, p = ours(SnrCompareFunc(), a, b), theirs(pg.SnrCompareFunc(), a, b)
        assert r.snr == p.snr == pytest.approx(26.6901, abs=5e-5) and r and p
        no_signal = ours(SnrCompareFunc(), np.zeros(2, F32), np.ones(2, F32))
        assert no_signal.snr == -math.inf and not no_signal
        assert ours(SnrCompareFunc(), a, a.copy()).snr == math.inf

    def test_thresholds_are_inclusive(self):
        a, b = np.array([3, 4], F32), np.array([4, 3], F32)
        assert ours(CosineSimilarityCompareFunc(cosine_similarity_threshold=0.96), a, b)
        assert ours(L2CompareFunc(l2_threshold=math.sqrt(2)), a, b)
        assert not ours(L2CompareFunc(l2_threshold=1.414), a, b)

    def test_per_output_thresholds(self):
        func = L2CompareFunc(l2_threshold={"": 0.5, "wide": 2.0})
        result = func(it("a", y=[0.0], wide=[0.0]), it("b", y=[1.0], wide=[1.0]))
        assert not result["y"] and result["wide"]
        assert func.thresholds_for("wide") == L2Threshold(2.0) and func.thresholds_for("other").threshold == 0.5
        assert result["wide"].thresholds == L2Threshold(2.0)

    def test_invalid_threshold(self):
        with pytest.raises(GateError, match="l2_threshold must be a number"):
            L2CompareFunc(l2_threshold="tight")
        with pytest.raises(GateError, match="psnr_threshold must be a number"):
            PsnrCompareFunc(psnr_threshold={"": float("nan")})


def arrays(shape):
    dtype = st.sampled_from([np.float32, np.float16, np.int32])

    def draw(dt):
        if dt is np.int32:
            # Within +-46340 every product and square fits int32, where Polygraphy does not wrap.
            return hnp.arrays(dt, shape, elements=st.integers(-46340, 46340))
        return hnp.arrays(dt, shape, elements=st.floats(width=16 if dt is np.float16 else 32))

    return dtype.flatmap(draw)


@st.composite
def array_pairs(draw):
    shape = draw(hnp.array_shapes(min_dims=0, max_dims=3, min_side=1, max_side=8))
    return draw(arrays(shape)), draw(arrays(shape))


@pytest.mark.parametrize(("func", "pg_func", "field"), METRICS, ids=[m[2] for m in METRICS])
@settings(max_examples=300, deadline=None)
@given(pair=array_pairs())
def test_metrics_equal_polygraphys(func, pg_func, field, pair):
    """Bit-identical, NaN and inf included, for float32 / float16 / int32 (also mixed)."""
    a, b = pair
    with np.errstate(all="ignore"):
        expected = theirs(pg_func(), a, b)
    result = ours(func(), a, b)
    if field == "cosine_similarity" and _dot_overflows(a, b):  # D21: ours in float64, scaled
        x, y = (np.ravel(v).astype(np.float64) for v in (a, b))
        x, y = x / np.max(np.abs(x)), y / np.max(np.abs(y))
        assert getattr(result, field) == pytest.approx(x @ y / np.linalg.norm(x) / np.linalg.norm(y), abs=1e-12)
        return
    assert same(getattr(result, field), getattr(expected, field)), (a, b)
    assert bool(result) is bool(expected)


def _dot_overflows(a, b) -> bool:
    """Polygraphy's cosine dot product, in the cast-up input dtype, overflows on finite nonzero data."""
    from gate.comparator.distances import _operand

    x, y = np.ravel(_operand(a)), np.ravel(_operand(b))
    with np.errstate(all="ignore"):
        finite = np.isfinite(x).all() and np.isfinite(y).all() and x.any() and y.any()
        return bool(finite and not np.isfinite(np.sum(np.multiply(x, y))))


class TestDeviations:
    @pytest.mark.parametrize(("func", "pg_func", "field"), METRICS, ids=[m[2] for m in METRICS])
    def test_d4_empty_outputs_pass_with_no_metric(self, func, pg_func, field):
        e = np.zeros((0, 3), F32)
        r = ours(func(), e, e.copy())
        assert r and getattr(r, field) is None and r.num_elements == 0

    def test_d4_polygraphy_fails_empty_psnr_and_snr(self):
        e = np.zeros((0, 3), F32)
        with np.errstate(all="ignore"), pytest.warns(RuntimeWarning, match="Mean of empty slice"):
            assert math.isnan(theirs(pg.PsnrCompareFunc(), e, e).psnr) and not theirs(pg.SnrCompareFunc(), e, e)

    @pytest.mark.parametrize(("func", "pg_func", "field"), METRICS, ids=[m[2] for m in METRICS])
    def test_d8_shape_mismatch_is_a_failure_with_both_shapes(self, func, pg_func, field):
        a, b = np.zeros((2, 3), F32), np.zeros((1, 3), F32)
        r = ours(func(), a, b)
        assert not r and r.error == "has shape (2, 3) in 'a' but (1, 3) in 'b'"
        assert r.shapes == ((2, 3), (1, 3)) and getattr(r, field) is None
        assert theirs(pg_func(), a, b) is False
        assert not ours(func(check_shapes=False), np.zeros((2, 3), F32), np.zeros((3, 2), F32))

    def test_d5_exact_names_and_missing_outputs(self):
        result = L2CompareFunc()(it("live", x=[1.0], extra=[1.0]), it("golden", x=[1.0], other=[2.0]))
        assert list(result) == ["x", "extra", "other"]
        assert result["x"] and result["x"].output1_name == "x"
        assert result["extra"].error == "is missing from 'golden'" and not result["extra"]
        assert result["other"].error == "is missing from 'live'" and not result["other"]
        with pytest.raises(GateError, match="No common outputs"):
            SnrCompareFunc()(it("live", p=[1.0]), it("golden", zz=[1.0]))

    def test_opt_in_pairing(self):
        func = L2CompareFunc(find_output_func=lambda name, index, other: ["x_1"])
        assert list(func(it("a", x=[1.0]), it("b", x_1=[1.0]))) == ["x"]

    @pytest.mark.parametrize(("func", "pg_func", "field"), METRICS, ids=[m[2] for m in METRICS])
    def test_fail_fast_stops_at_the_first_failure(self, func, pg_func, field):
        a = it("a", p=np.array([1, 2], F32), q=np.array([1, 2], F32), r=np.array([1, 2], F32))
        b = it("b", p=np.array([1, 2], F32), q=np.array([-5, 7], F32), r=np.array([-5, 7], F32))
        assert list(func(fail_fast=True)(a, b)) == ["p", "q"]
        assert list(func()(a, b)) == ["p", "q", "r"]

    def test_integers_do_not_wrap_around(self):
        # Not yet in the D table. Polygraphy's int32 difference wraps: L2 of 2**31-1 vs -2**31+1 is 2.
        a, b = np.array([2**31 - 1], np.int32), np.array([-(2**31) + 1], np.int32)
        assert ours(L2CompareFunc(), a, b).l2_norm == 4294967294.0
        assert theirs(pg.L2CompareFunc(), a, b).l2_norm == 2.0
        # ...and so do its int32 products: identical outputs get cosine -0.99999568 (a false FAIL).
        same_ints = np.array([46341, 1], np.int32)
        assert ours(CosineSimilarityCompareFunc(), same_ints, same_ints.copy()).cosine_similarity == 1.0
        assert theirs(pg.CosineSimilarityCompareFunc(), same_ints, same_ints.copy()).cosine_similarity < -0.99999

    def test_bool_outputs_are_compared_as_zero_and_one(self):
        a, b = np.array([True, True, False]), np.array([True, False, False])
        assert ours(L2CompareFunc(), a, b).l2_norm == 1.0
        assert ours(SnrCompareFunc(), a, b).snr == pytest.approx(10 * math.log10(2))
        with pytest.raises(TypeError):  # Polygraphy: numpy boolean subtract
            theirs(pg.L2CompareFunc(), a, b)

    def test_inputs_never_modified(self):
        a, b = np.array([1, 2, 3], np.float16), np.array([3, 2, 1], np.float16)
        a0, b0 = a.copy(), b.copy()
        for func, _, _ in METRICS:
            ours(func(), a, b)
        assert np.array_equal(a, a0) and np.array_equal(b, b0)


def run_of(name, values):
    return RunResults([(name, [it(name, y=np.array(v, F32)) for v in values])])


def pg_run_of(name, values):
    return PgRunResults(
        [(name, [pg_struct.IterationResult({"y": np.array(v, F32)}, runner_name=name) for v in values])]
    )


class TestCheckAverage:
    A = [[0, 0], [0, 0], [0, 0]]
    B = [[3, 4], [0, 0], [0, 1]]  # L2 per iteration: 5, 0, 1 -> mean 2

    def test_case24_25_averaged_l2_decides(self):
        passing = Comparator.compare_accuracy(
            [run_of("a", self.A), run_of("b", self.B)], compare_func=L2CompareFunc(l2_threshold=2.5), check_average=True
        )[0]
        assert passing.stats() == (2, 1, 3)  # per iteration: 5 > 2.5 fails once
        averaged = passing.average_results()["y"]
        assert isinstance(averaged, L2Result) and averaged.l2_norm == 2.0 and passing
        expected = PgComparator.compare_accuracy(
            [pg_run_of("a", self.A), pg_run_of("b", self.B)],
            compare_func=pg.L2CompareFunc(l2_threshold=2.5),
            check_average=True,
        )[0]
        assert expected.average_results()["y"].l2_norm == averaged.l2_norm and bool(expected)
        failing = Comparator.compare_accuracy(
            [run_of("a", self.A), run_of("b", self.B)], compare_func=L2CompareFunc(l2_threshold=1.5), check_average=True
        )[0]
        assert failing.average_results()["y"].l2_norm == 2.0 and not failing

    def test_nan_propagates_and_empty_outputs_pass(self):
        acc = Comparator.compare_accuracy(
            [run_of("a", [[0], [np.nan]]), run_of("b", [[0], [0]])],
            compare_func=SnrCompareFunc(),
            check_average=True,
        )[0]
        assert math.isnan(acc.average_results()["y"].snr) and not acc
        empty = Comparator.compare_accuracy(
            [run_of("a", [[], []]), run_of("b", [[], []])], compare_func=PsnrCompareFunc(), check_average=True
        )[0]
        assert empty.average_results()["y"].psnr is None and empty

    def test_averaged_over_a_shape_mismatch_is_an_error(self):
        acc = Comparator.compare_accuracy(
            [run_of("a", [[0, 0], [0, 0, 0]]), run_of("b", [[0, 0], [0, 0]])],
            compare_func=CosineSimilarityCompareFunc(),
            check_average=True,
        )[0]
        with pytest.raises(GateError, match=r"output 'y': iteration 1 has shape \(3,\) in 'a' but \(2,\) in 'b'"):
            bool(acc)

    def test_case26_indices_rejected(self):
        with pytest.raises(GateError, match="does not produce averageable metrics"):
            Comparator.compare_accuracy(
                [run_of("a", [[0]]), run_of("b", [[0]])], compare_func=IndicesCompareFunc(), check_average=True
            )
        with pytest.raises(GateError, match="fail_fast"):
            Comparator.compare_accuracy(
                [run_of("a", [[0]]), run_of("b", [[0]])],
                compare_func=L2CompareFunc(),
                check_average=True,
                fail_fast=True,
            )

    def test_case31_several_metric_funcs(self):
        runs = [run_of("a", [[3, 4]]), run_of("b", [[4, 3]])]
        results = Comparator.compare_accuracy(runs, compare_func=[L2CompareFunc(), CosineSimilarityCompareFunc(0.9)])
        assert len(results) == 2 and not results[0] and results[1] and not results


class TestIndices:
    def test_batches_and_first_mismatch(self):
        a = np.array([[[0, 1, 2], [0, 1, 2]], [[0, 1, 2], [2, 1, 0]]])
        b = np.array([[[0, 1, 2], [0, 1, 2]], [[0, 1, 2], [0, 1, 2]]])
        r = ours(IndicesCompareFunc(), a, b)
        assert not r and r.mismatch_count == 2 and r.first_mismatch == ((1, 1), 0)
        assert theirs(pg.IndicesCompareFunc(), a, b) is False
        assert ours(IndicesCompareFunc(fail_fast=True), a, b).mismatch_count == 1

    def test_shape_mismatch_and_zero_d(self):
        r = ours(IndicesCompareFunc(), np.zeros((2, 3), np.int64), np.zeros((2, 4), np.int64))
        assert not r and r.error == "has shape (2, 3) in 'a' but (2, 4) in 'b'"
        assert ours(IndicesCompareFunc(), np.int64(3), np.int64(3)) and not ours(IndicesCompareFunc(), 3, 4)
        assert ours(IndicesCompareFunc(), np.zeros((0, 5), np.int64), np.zeros((0, 5), np.int64))

    def test_missing_outputs_and_fail_fast(self):
        result = IndicesCompareFunc()(it("a", i=[0, 1], j=[0, 1]), it("b", i=[1, 0], k=[0]))
        assert list(result) == ["i", "j", "k"] and not result["i"] and result["j"].error == "is missing from 'b'"
        assert list(IndicesCompareFunc(fail_fast=True)(it("a", i=[0, 1], j=[0, 1]), it("b", i=[1, 0], j=[0, 1]))) == [
            "i"
        ]

    def test_per_output_tolerance_and_validation(self):
        result = IndicesCompareFunc(index_tolerance={"": 0, "loose": 1})(
            it("a", strict=[1, 0, 2], loose=[1, 0, 2]), it("b", strict=[0, 1, 2], loose=[0, 1, 2])
        )
        assert not result["strict"] and result["loose"]
        with pytest.raises(GateError, match="index_tolerance must be an integer >= 0"):
            IndicesCompareFunc(index_tolerance=-1)
        with pytest.raises(GateError, match="must be given together"):
            IndicesCompareFunc(ties_compare_equal=True)
        with pytest.raises(NotImplementedError):
            IndicesCompareFunc().thresholds_for("")

    def test_tie_atol_and_missing_scores(self):
        func = IndicesCompareFunc(ties_compare_equal=True, tie_values={"i": ("s", "s")}, tie_atol=1e-6)
        a = it("a", i=[1, 3], s=np.array([0.9, 0.9], F32))
        assert func(a, it("b", i=[3, 1], s=np.array([0.9, 0.9000001], F32)))["i"]
        strict = IndicesCompareFunc(ties_compare_equal=True, tie_values={"i": "s"})
        assert not strict(a, it("b", i=[3, 1], s=np.array([0.9, 0.9000001], F32)))["i"]
        missing = strict(a, it("b", i=[3, 1]))["i"]
        assert not missing and missing.error == "needs tie scores 's', which is missing from 'b'"


TOPK_X = np.array(
    [
        [0.1, 0.9, 0.5, 0.9, 0.2, 0.0],  # 0.9 at 1 and 3
        [0.3, 0.3, 0.05, 0.1, 0.7, 0.3],  # 0.3 at 0, 1 and 5: a tie across the K boundary
    ],
    F32,
)


@pytest.fixture
def topk_model(tmp_path):
    k = numpy_helper.from_array(np.array([3], np.int64), "k")
    graph = helper.make_graph(
        [helper.make_node("TopK", ["x", "k"], ["values", "indices"], axis=-1, largest=1, sorted=1)],
        "topk",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 6])],
        [
            helper.make_tensor_value_info("values", TensorProto.FLOAT, [2, 3]),
            helper.make_tensor_value_info("indices", TensorProto.INT64, [2, 3]),
        ],
        [k],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    path = tmp_path / "topk.onnx"
    onnx.save(model, str(path))
    return path


def run_topk(path, second_indices, second_values=None):
    """Runs the TopK model with onnxruntime as two runners, then gives the second one other indices
    (and values) as a backend with another tie-breaking would."""
    runners = [OnnxrtRunner(SessionFromOnnx(path), name=name) for name in ("ort", "other")]
    run = Comparator.run(runners, data_loader=[OrderedDict(x=TOPK_X)])
    other = run["other"][0]
    other["indices"] = np.array(second_indices, np.int64)
    if second_values is not None:
        other["values"] = np.array(second_values, F32)
    return run


class TestTopKTies:
    def test_onnxruntime_orders_ties_by_index(self, topk_model):
        ort = run_topk(topk_model, [[1, 3, 2], [4, 0, 1]])["ort"][0]
        assert ort["indices"].tolist() == [[1, 3, 2], [4, 0, 1]]
        assert ort["values"][0, 0] == ort["values"][0, 1] and ort["values"][1, 1] == ort["values"][1, 2]

    def test_swapped_ties_fail_by_default_and_pass_tie_aware(self, topk_model):
        run = run_topk(topk_model, [[3, 1, 2], [4, 1, 5]])  # 0.9s swapped; 0.3s at 1 and 5 instead of 0 and 1
        default = Comparator.compare_accuracy(run, compare_func=IndicesCompareFunc())[0]
        assert default.stats() == (0, 1, 1) and default[("ort", "other")][0]["indices"].mismatch_count == 4
        pg_run = PgRunResults([(n, [pg_struct.IterationResult(dict(r[0]), runner_name=n)]) for n, r in run.items()])
        assert not PgComparator.compare_accuracy(pg_run, compare_func=pg.IndicesCompareFunc())
        assert not Comparator.compare_accuracy(run, compare_func=IndicesCompareFunc(index_tolerance=1))

        tie_aware = IndicesCompareFunc(ties_compare_equal=True, tie_values={"indices": ("values", "values")})
        acc = Comparator.compare_accuracy(run, compare_func=tie_aware)[0]
        assert acc, "tied indices in another order, with equal scores"
        indices = acc[("ort", "other")][0]
        assert list(indices) == ["indices"] and indices["indices"].tie_count == 4  # "values" is not an index output
        values = [r[0]["values"] for _, r in run.items()]
        assert SimpleCompareFunc(atol=0, rtol=0)(it("ort", v=values[0]), it("other", v=values[1]))["v"]

    def test_tie_aware_still_fails_a_wrong_order(self, topk_model):
        # A wrong backend puts 0.5 (index 2) before the second 0.9 (index 3), and reports those scores.
        run = run_topk(topk_model, [[1, 2, 3], [4, 0, 1]], second_values=[[0.9, 0.5, 0.9], [0.7, 0.3, 0.3]])
        tie_aware = IndicesCompareFunc(ties_compare_equal=True, tie_values={"indices": "values"})
        result = Comparator.compare_accuracy(run, compare_func=tie_aware)[0][("ort", "other")][0]["indices"]
        assert not result and result.mismatch_count == 2 and result.first_mismatch == ((0,), 1)
