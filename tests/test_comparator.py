"""The streaming comparator: Polygraphy 0.53.6's conformance cases (shared/spec section 8.2) and
the deviations D1-D8, with real values. Polygraphy itself is run as the oracle where we agree."""

from __future__ import annotations

import math
from collections import OrderedDict

import numpy as np
import pytest
from polygraphy.comparator import compare as pg_compare
from polygraphy.comparator import struct as pg_struct

from gate.backend.base import BaseRunner, TensorMetadata
from gate.comparator import (
    AccuracyResult,
    Comparator,
    IterationResult,
    RunResults,
    SimpleCompareFunc,
)
from gate.errors import GateError


def it(runner, **outputs):
    return IterationResult(OrderedDict((k, np.asarray(v)) for k, v in outputs.items()), runner_name=runner)


def ours(a, b, **kwargs):
    return SimpleCompareFunc(**kwargs)(it("a", y=a), it("b", y=b))["y"]


def polygraphy(a, b, **kwargs):
    func = pg_compare.SimpleCompareFunc(**kwargs)
    a_it = pg_struct.IterationResult({"y": np.asarray(a)}, runner_name="a")
    b_it = pg_struct.IterationResult({"y": np.asarray(b)}, runner_name="b")
    return func(a_it, b_it)["y"]


F32 = np.float32


class TestSimpleCompareFunc:
    def test_case1_default_fails_with_polygraphy_statistics(self):
        a, b = np.array([1, 2, 3, 4], F32), np.array([1, 2, 3, 4.5], F32)
        r, p = ours(a, b), polygraphy(a, b)
        assert not r and not p
        assert r.max_absdiff == p.max_absdiff == 0.5
        assert r.max_reldiff == p.max_reldiff == pytest.approx(0.5 / 4.5, rel=1e-7)
        assert r.mean_absdiff == pytest.approx(0.125, rel=1e-12)
        assert r.median_absdiff == p.median_absdiff == 0.0  # computed by default, as Polygraphy does
        assert ours(a, b, compute_medians=False).median_absdiff is None  # the gate's opt-out
        assert ours(a, b, check_error_stat="median").median_absdiff == p.median_absdiff == 0.0
        assert r.worst_index == (3,) and r.mismatch_count == 1 and r.num_elements == 4

    @pytest.mark.parametrize("stat", ["max", "mean", "median", "elemwise"])
    def test_case2_either_tolerance_is_enough(self, stat):
        a, b = np.array([1, 2], F32), np.array([1.25, 2.5], F32)
        for kwargs, expected in (({}, False), ({"rtol": 0.25}, True), ({"atol": 0.5}, True)):
            assert bool(ours(a, b, check_error_stat=stat, **kwargs)) is expected
            assert bool(polygraphy(a, b, check_error_stat=stat, **kwargs)) is expected

    def test_case3_elemwise_needs_each_element_within_one_tolerance(self):
        a, b = np.array([0, 1, 2, 3], F32), np.array([0.15, 1.25, 2.5, 3.75], F32)
        assert not ours(a, b, atol=0.3)
        assert not ours(a, b, rtol=0.25)
        assert ours(a, b, atol=0.3, rtol=0.25)

    def test_case4_stats_and_inclusive_boundary(self):
        a = np.zeros(100, F32)
        a[0] = 100
        b = np.zeros(100, F32)
        verdicts = {s: bool(ours(a, b, atol=1, check_error_stat=s)) for s in ("max", "elemwise", "mean", "median")}
        assert verdicts == {"max": False, "elemwise": False, "mean": True, "median": True}
        assert ours(a, b, atol=1, check_error_stat="mean").mean_absdiff == 1.0

    def test_case5_tolerance_inclusive(self):
        assert ours(np.array([1.0], F32), np.array([1.5], F32), atol=0.5, rtol=0)
        assert ours(np.array([1.0], F32), np.array([1.0], F32), atol=0, rtol=0)

    @pytest.mark.parametrize("stat", ["max", "mean", "median", "elemwise"])
    def test_case6_nan_fails(self, stat):
        for a, b in (([np.nan], [1.0]), ([1.0], [np.nan]), ([np.nan], [np.nan])):
            assert not ours(np.array(a, F32), np.array(b, F32), check_error_stat=stat)

    def test_nans_compare_equal_is_opt_in(self):
        a = np.array([np.nan, 1.0], F32)
        assert ours(a, a.copy(), nans_compare_equal=True)
        assert not ours(a, np.array([1.0, 1.0], F32), nans_compare_equal=True)

    def test_d1_same_sign_infinities_match_by_default(self):
        inf = np.array([np.inf, -np.inf, 1.0], F32)
        assert ours(inf, inf.copy())
        assert not polygraphy(inf, inf.copy())  # Polygraphy 0.53.6 fails this (D1)
        assert ours(inf, inf.copy(), infinities_compare_equal=True).max_absdiff == 0.0
        assert not ours(np.array([np.inf], F32), np.array([-np.inf], F32))
        assert not ours(np.array([np.inf], F32), np.array([1.0], F32))
        assert not ours(inf, inf.copy(), infinities_compare_equal=False)

    def test_case10_narrow_integers_widened(self):
        r = ours(np.array([0], np.uint8), np.array([1], np.uint8))
        assert (r.max_absdiff, r.max_reldiff) == (1.0, 1.0)
        assert ours(np.array([1], np.uint8), np.array([0], np.uint8)).max_reldiff == math.inf
        r16 = ours(np.array([1], np.float16), np.array([0], np.float16))
        assert r16.max_reldiff == polygraphy(np.array([1], np.float16), np.array([0], np.float16)).max_reldiff
        assert r16.max_reldiff == 4503599627370496.0

    def test_case12_bool(self):
        assert not ours(np.zeros((4, 4), bool), np.ones((4, 4), bool))
        r = ours(np.array([True, False]), np.array([True, False]))
        assert r and r.max_absdiff == 0.0 and r.max_reldiff == 0.0  # D2: 0, not NaN
        assert ours(np.zeros((4, 4), bool), np.ones((4, 4), bool)).mismatch_count == 16

    def test_d2_integer_relative_error_never_nan(self):
        r = ours(np.array([1, 0], np.int32), np.array([0, 0], np.int32))
        p = polygraphy(np.array([1, 0], np.int32), np.array([0, 0], np.int32))
        assert math.isnan(p.max_reldiff)  # Polygraphy: 0/0 = NaN
        assert r.max_reldiff == math.inf and not r
        assert r.mean_reldiff == math.inf

    def test_d3_mean_in_float64(self):
        a = np.full(10_000_001, 0.1, np.float64)
        b = np.zeros_like(a)
        r = ours(a, b, check_error_stat="mean", atol=1)
        assert r.mean_absdiff == pytest.approx(0.1, rel=1e-12)
        assert abs(polygraphy(a, b, check_error_stat="mean").mean_absdiff - 0.1) > 1e-7  # float32 sum drifts

    def test_d4_empty_tensors_pass_with_na(self):
        e = np.zeros((0, 3), F32)
        for stat in ("elemwise", "max", "mean", "median"):
            r = ours(e, e.copy(), check_error_stat=stat)
            assert r and r.max_absdiff is None and r.mean_absdiff is None
        assert not polygraphy(e, e.copy(), check_error_stat="mean")  # D4: Polygraphy fails on NaN

    def test_strings_compare_by_equality(self):
        a = np.array(["héllo", "world", "x"], dtype=object)
        assert ours(a, a.copy()) and ours(a, a.copy()).max_absdiff == 0.0
        r = ours(a, np.array(["héllo", "word", "y"], dtype=object))
        assert not r and r.mismatch_count == 2 and r.worst_index == (1,) and r.max_absdiff == 1.0
        assert not ours(np.array(["a"]), np.array(["b"]), atol=0.5, rtol=0.5)

    def test_zero_d_scalars(self):
        r = ours(np.float32(1.0), np.float32(1.5), atol=0.5)
        assert r and r.max_absdiff == 0.5 and r.worst_index == ()

    def test_d8_shape_mismatch_is_a_failure_with_reason(self):
        r = ours(np.zeros((2, 3), F32), np.zeros((1, 3), F32))
        assert not r and r.error == "has shape (2, 3) but the reference has shape (1, 3)"
        assert polygraphy(np.zeros((2, 3), F32), np.zeros((1, 3), F32)) is False

    def test_zero_reference_elements_counted(self):
        r = ours(np.array([1e-20, 0], F32), np.array([0, 0], F32))
        assert r.zero_reference_count == 2 and r
        assert r.max_reldiff == pytest.approx(polygraphy(np.array([1e-20, 0], F32), np.array([0, 0], F32)).max_reldiff)

    def test_per_output_tolerances_case8(self):
        func = SimpleCompareFunc(atol={"output1": 1.0})
        a = it("a", output0=np.array([1.0], F32), output1=np.array([1.0], F32))
        b = it("b", output0=np.array([2.0], F32), output1=np.array([2.0], F32))
        result = func(a, b)
        assert not result["output0"] and result["output1"]
        both = SimpleCompareFunc(atol={"": 1.0})(a, b)
        assert both["output0"] and both["output1"]

    def test_golden_never_modified(self):
        a = np.array([0.0, np.inf, 3.0], F32)
        b = np.array([0.0, np.inf, 4.0], F32)
        a0, b0 = a.copy(), b.copy()
        ours(a, b, check_error_stat="median")
        assert np.array_equal(a, a0) and np.array_equal(b, b0)

    def test_d5_exact_names_and_missing_outputs_listed(self):
        result = SimpleCompareFunc()(it("live", x=[1.0], extra=[1.0]), it("golden", x=[1.0], other=[2.0]))
        assert list(result) == ["x", "extra", "other"]
        assert result["x"] and not result["extra"] and not result["other"]
        assert result["extra"].error == "is missing from 'golden'"
        assert result["other"].error == "is missing from 'live'"
        with pytest.raises(GateError, match="No common outputs"):
            SimpleCompareFunc()(it("live", p=[1.0]), it("golden", zz=[1.0]))

    def test_invalid_stat_and_negative_tolerance(self):
        with pytest.raises(GateError, match="Invalid choice for check_error_stat: p99"):  # Polygraphy's wording
            SimpleCompareFunc(check_error_stat="p99")
        with pytest.raises(GateError, match="atol must be a non-negative number"):
            SimpleCompareFunc(atol=-1.0)
        with pytest.raises(GateError, match="rtol must be a non-negative number"):
            SimpleCompareFunc(rtol={"": float("nan")})


def run_of(name, values):
    return RunResults([(name, [it(name, y=np.array([v], F32)) for v in values])])


class TestCompareAccuracy:
    def test_case22_three_runners_pairs_and_stats(self):
        runs = [run_of("A", [0, 0, 0]), run_of("B", [0, 1, 0]), run_of("C", [0, 1, 0])]
        results = Comparator.compare_accuracy(runs)
        acc = results[0]
        assert list(acc) == [("A", "B"), ("B", "C")]
        assert [bool(d["y"]) for d in acc[("A", "B")]] == [True, False, True]
        assert acc.stats(("A", "B")) == (2, 1, 3)
        assert not results and not acc

    def test_case23_fail_fast_returns_at_once(self):
        runs = [run_of("A", [0, 0, 0]), run_of("B", [0, 1, 0]), run_of("C", [0, 1, 0])]
        acc = Comparator.compare_accuracy(runs, fail_fast=True)[0]
        assert len(acc[("A", "B")]) == 2 and len(acc[("B", "C")]) == 1

    def test_case24_25_check_average(self):
        func = SimpleCompareFunc(check_error_stat="mean", atol=1.5, rtol=0)
        acc = Comparator.compare_accuracy(
            [run_of("a", [0, 0]), run_of("b", [0, 2])], compare_func=func, check_average=True
        )[0]
        assert acc.aggregation == "average" and acc.stats() == (1, 1, 2)
        assert acc.average_results()["y"].mean_absdiff == 1.0 and acc
        acc = Comparator.compare_accuracy(
            [run_of("a", [0] * 4), run_of("b", [0, 0, 0, 8])], compare_func=func, check_average=True
        )[0]
        assert acc.stats() == (3, 1, 4) and acc.average_results()["y"].mean_absdiff == 2.0 and not acc

    def test_case26_check_average_rejections(self):
        runs = [run_of("a", [0]), run_of("b", [0])]
        with pytest.raises(GateError, match="fail_fast"):
            Comparator.compare_accuracy(
                runs, check_average=True, fail_fast=True, compare_func=SimpleCompareFunc(check_error_stat="max")
            )
        with pytest.raises(GateError, match="check_average is not supported with check_error_stat='elemwise'"):
            Comparator.compare_accuracy(runs, check_average=True)
        with pytest.raises(GateError, match="does not support average"):
            Comparator.compare_accuracy(runs, check_average=True, compare_func=lambda x, y: {"y": True})

    def test_case27_average_over_shape_mismatch_names_output(self):
        a = RunResults([("a", [it("a", y=np.zeros(2, F32)), it("a", y=np.zeros(3, F32))])])
        b = RunResults([("b", [it("b", y=np.zeros(2, F32)), it("b", y=np.zeros(2, F32))])])
        acc = Comparator.compare_accuracy(
            [a, b], check_average=True, compare_func=SimpleCompareFunc(check_error_stat="max")
        )[0]
        with pytest.raises(GateError, match="check_average cannot average output 'y': iteration 1 has shape"):
            bool(acc)

    def test_d6_different_iteration_counts_is_an_error(self):
        with pytest.raises(GateError, match=r"different numbers of iterations: \[3, 2\]"):
            Comparator.compare_accuracy([run_of("a", [0, 0, 0]), run_of("b", [0, 0])])

    def test_runner_set_change_mid_stream(self):
        stream = iter([run_of("a", [0]), run_of("x", [0])])
        other = iter([run_of("b", [0]), run_of("b", [0])])
        with pytest.raises(GateError, match="different set of runners"):
            Comparator.compare_accuracy([stream, other])

    def test_case30_nothing_to_compare_is_empty_and_truthy(self):
        assert len(Comparator.compare_accuracy(run_of("a", [0]))[0]) == 0
        assert Comparator.compare_accuracy(RunResults())
        assert Comparator.compare_accuracy([iter([])])

    def test_case31_several_compare_funcs(self):
        runs = [run_of("a", [0]), run_of("b", [0])]
        results = Comparator.compare_accuracy(runs, compare_func=[lambda x, y: {"y": False}, lambda x, y: {"y": True}])
        assert len(results) == 2 and not results[0] and results[1] and not results

    def test_accuracy_result_bool_and_percentage(self):
        acc = AccuracyResult({("a", "b"): [{"y": True}, {"y": False}]})
        assert not acc and acc.percentage() == 0.5 and AccuracyResult().percentage() == 1.0


class ReusingRunner(BaseRunner):
    """A runner that reuses one output buffer between calls (as TensorRT's runner does)."""

    def __init__(self, name, scale=1.0):
        super().__init__(name)
        self.scale = scale
        self.buffer = np.zeros(2, F32)
        self.activations = 0

    def activate_impl(self):
        self.activations += 1

    def get_input_metadata_impl(self):
        return TensorMetadata().add("x", F32, (2,))

    def infer_impl(self, feed_dict):
        self.buffer[...] = feed_dict["x"] * self.scale
        self.inference_time = 0.0
        return OrderedDict(y=self.buffer)


def feeds(n):
    return [OrderedDict(x=np.full(2, i, F32)) for i in range(n)]


class TestRun:
    def test_case34_streaming_is_lazy_and_yields_every_runner(self):
        a, b = ReusingRunner("A"), ReusingRunner("B")
        pulled = []

        def loader():
            for i, feed in enumerate(feeds(3)):
                pulled.append(i)
                yield feed

        stream = Comparator.run([a, b], data_loader=loader(), streaming=True)
        assert a.activations == 0 and pulled == []
        first = next(stream)
        assert a.is_active and b.is_active and pulled == [0]
        assert first.keys() == ["A", "B"] and len(first["A"]) == 1
        rest = list(stream)
        assert len(rest) == 2 and not a.is_active and not b.is_active

    def test_streaming_compare_uses_each_item_before_the_next(self):
        stream = Comparator.run([ReusingRunner("A"), ReusingRunner("B", scale=1.0)], feeds(4), streaming=True)
        acc = Comparator.compare_accuracy(stream)[0]
        assert acc.stats(("A", "B")) == (4, 0, 4)
        stream = Comparator.run([ReusingRunner("A"), ReusingRunner("B", scale=2.0)], feeds(4), streaming=True)
        acc = Comparator.compare_accuracy(stream)[0]
        assert acc.stats(("A", "B")) == (1, 3, 4)  # only x=0 matches

    def test_streaming_rejects_warm_up(self):
        with pytest.raises(GateError, match="warm_up"):
            Comparator.run([ReusingRunner("A")], feeds(1), warm_up=2, streaming=True)

    def test_case33_materialized_copies_only_with_several_iterations(self):
        runner = ReusingRunner("A")
        one = Comparator.run([runner], feeds(1))
        assert one["A"][0]["y"] is runner.buffer
        two = Comparator.run([ReusingRunner("A")], feeds(2))
        assert two["A"][0]["y"].tolist() == [0, 0] and two["A"][1]["y"].tolist() == [1, 1]

    def test_case32_validate(self):
        nan = RunResults([("a", [it("a", y=np.array([np.nan], F32))])])
        inf = RunResults([("a", [it("a", y=np.array([np.inf], F32))])])
        ok = RunResults([("a", [it("a", y=np.array([1.0], F32))])])
        assert Comparator.validate(nan) is False
        assert Comparator.validate(inf) is True and Comparator.validate(inf, check_inf=True) is False
        assert Comparator.validate([ok, nan]) == [True, False]
        stream = Comparator.validate(iter([ok, nan]))
        assert next(stream) is ok
        invalid = r"iteration 1 contains invalid values \(NaNs/Infs\): runner 'a', output 'y' contains NaN"
        with pytest.raises(GateError, match=invalid):
            next(stream)


class TestTopKPostprocess:
    def test_matches_polygraphy_including_ties_and_axis(self):
        from polygraphy.comparator import TopKPostprocessFunc as PgTopK
        from polygraphy.comparator import struct as pgs

        from gate.comparator.postprocess import TopKPostprocessFunc

        rng = np.random.default_rng(0)
        x = rng.integers(0, 4, size=(3, 7)).astype(F32)  # many ties
        for k in (3, (2, 0), 100, {"y": 2}, {"": (1, 0)}):
            ours = TopKPostprocessFunc(k)(it("a", y=x.copy(), z=x.copy()))
            theirs = PgTopK(k)(pgs.IterationResult({"y": x.copy(), "z": x.copy()}, runner_name="a"))
            for name in ("y", "z"):
                assert np.array_equal(ours[name], theirs[name]), (k, name)
        assert TopKPostprocessFunc({"y": 2})(it("a", z=x.copy()))["z"] is not None

    def test_postprocess_then_compare_indices(self):
        from gate.comparator.postprocess import TopKPostprocessFunc

        a = RunResults([("a", [it("a", y=np.array([0.1, 0.9, 0.5], F32))])])
        b = RunResults([("b", [it("b", y=np.array([0.2, 0.8, 0.6], F32))])])
        top = TopKPostprocessFunc(2)
        a, b = Comparator.postprocess(a, top), Comparator.postprocess(b, top)
        assert a["a"][0]["y"].tolist() == [1, 2] and b["b"][0]["y"].tolist() == [1, 2]
        assert Comparator.compare_accuracy([a, b])


class TestFuzzyOutputMatching:
    def test_opt_in_matches_polygraphy_case16(self):
        from gate.comparator.compare import fuzzy_find_output

        fuzzy = SimpleCompareFunc(find_output_func=fuzzy_find_output, atol=1.0)
        result = fuzzy(it("a", x=[1.0]), it("b", out=[5.0], x_1=[1.5]))
        assert result["x"].output1_name == "x_1" and result["x"]  # substring
        result = fuzzy(it("a", p=[1.0], q=[2.0]), it("b", zz=[1.0], ww=[2.0]))
        assert [(r.output0_name, r.output1_name) for r in result.values() if r.output1_name] == [
            ("p", "zz"),
            ("q", "ww"),
        ]  # by position, as Polygraphy does
        with pytest.raises(GateError, match="No common outputs"):
            SimpleCompareFunc()(it("a", p=[1.0], q=[2.0]), it("b", zz=[1.0], ww=[2.0]))  # D5 default: exact


def test_text_against_numbers_cannot_be_compared():
    for b in (np.array(["a", "b"]), np.array(["a", "b"], dtype=object), np.array([b"x", b"y"])):
        r = ours(np.array([1.0, 2.0], F32), b)
        assert not r and "text cannot be compared with numbers" in r.error and "float32" in r.error
