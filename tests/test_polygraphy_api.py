"""Differential tests of the Polygraphy 0.53.6 API names added to ``gate.comparator`` (issue 15):
the same inputs through polygraphy and through ours give the same outputs, the same warnings and
errors (GateError for PolygraphyException), and the same JSON bytes where the format is Polygraphy's.
Data model and compare functions here; loaders, runners and the tools in test_polygraphy_api_io.py."""

from __future__ import annotations

import warnings
from collections import OrderedDict

import numpy as np
import polygraphy.comparator as pg
import polygraphy.comparator.compare as pg_compare
import polygraphy.comparator.struct as pg_struct
import pytest
from polygraphy.exception import PolygraphyException

import gate.comparator as ours
from gate.comparator import funcs as our_funcs
from gate.comparator.struct import LazyArray
from gate.errors import GateError

F32 = np.float32


def both(module, **outputs_by_runner):
    """``{runner: {name: array}}`` -> IterationResults of ``module`` (ours or Polygraphy's)."""
    return [module.IterationResult(OrderedDict(outs), runner_name=r) for r, outs in outputs_by_runner.items()]


def run_results(module):
    run = module.RunResults()
    x = np.arange(6, dtype=F32).reshape(2, 3)
    run.append(("a", [module.IterationResult({"y": x, "z": np.array([1, 2], np.int64)}, 0.5, "a")]))
    run.append(("b", [module.IterationResult({"y": x + 0.25, "z": np.array([1, 3], np.int64)}, None, "b")]))
    return run


class TestRunResultsJson:
    def test_append_extend_and_to_json_bytes(self):
        theirs, mine = run_results(pg), run_results(ours)
        assert mine.keys() == list(theirs.keys()) == ["a", "b"]
        assert mine.to_json() == theirs.to_json()
        mine.extend([("c", [])])
        theirs.extend([("c", [])])
        assert mine.to_json() == theirs.to_json()

    def test_append_refuses_what_is_not_a_pair(self):
        with pytest.raises(GateError, match="Unsupported value type"):
            ours.RunResults().append(["a", []])
        with pytest.raises(PolygraphyException):
            pg.RunResults().append(["a", []])

    def test_save_load_both_ways(self, tmp_path):
        run_results(pg).save(str(tmp_path / "pg.json"))
        run_results(ours).save(str(tmp_path / "ours.json"))
        assert (tmp_path / "pg.json").read_bytes() == (tmp_path / "ours.json").read_bytes()
        loaded = ours.RunResults.load(str(tmp_path / "pg.json"))
        assert loaded == run_results(ours) and loaded["a"][0].runtime == 0.5
        assert pg.RunResults.load(str(tmp_path / "ours.json")) == run_results(pg)
        with open(tmp_path / "f.json", "w") as f:
            run_results(ours).save(f)
        assert (tmp_path / "f.json").read_bytes() == (tmp_path / "pg.json").read_bytes()
        with open(tmp_path / "f.json") as f:
            assert ours.RunResults.load(f) == run_results(ours)

    def test_from_json_checks_the_type(self):
        text = run_results(pg).to_json()
        assert ours.RunResults.from_json(text) == run_results(ours)
        with pytest.raises(GateError, match="cannot be decoded into a AccuracyResults"):
            ours.AccuracyResults.from_json(text)
        with pytest.raises(PolygraphyException, match="cannot be decoded into a AccuracyResults"):
            pg.AccuracyResults.from_json(text)

    def test_load_streaming_of_a_polygraphy_directory(self, tmp_path):
        run = run_results(pg)
        for index, single in enumerate(run.split()):
            single.save(str(tmp_path / f"{index:010d}.json"))
        mine = [r.to_json() for r in ours.RunResults.load_streaming(str(tmp_path))]
        theirs = [r.to_json() for r in pg.RunResults.load_streaming(str(tmp_path))]
        assert mine == theirs and len(mine) == 1
        with pytest.raises(GateError, match="allow_dirs=False"):
            list(ours.RunResults.load_streaming(str(tmp_path), allow_dirs=False))

    def test_missing_runner_wording(self):
        with pytest.raises(GateError, match="x does not exist in this RunResults instance"):
            ours.RunResults()["x"]


def accuracy(module, funcs):
    a, b = both(
        module,
        # Reference powers of two: every relative error is exact in float32, so Polygraphy's float32
        # means equal our float64 ones (D3); no integer zero in a reference (D2): the JSON bytes can be compared.
        a={"y": np.array([1.0, 2.5, 4.0, 10.0], F32), "i": np.array([1, 2, 3], np.int32)},
        b={"y": np.array([1.0, 2.0, 4.0, 8.0], F32), "i": np.array([1, 2, 3], np.int32)},
    )
    run = module.RunResults([("a", [a]), ("b", [b])])
    return module.Comparator.compare_accuracy(run, compare_func=funcs(module))


SIMPLE = [
    lambda m: m.SimpleCompareFunc(),
    lambda m: m.SimpleCompareFunc(check_error_stat="max", atol=0.1),
    lambda m: m.SimpleCompareFunc(check_error_stat="median", rtol={"": 0.2}),
    lambda m: [
        m.L2CompareFunc(l2_threshold=1.0),
        m.CosineSimilarityCompareFunc(),
        m.PsnrCompareFunc(),
        m.SnrCompareFunc(),
    ],
]


class TestAccuracyResultsJson:
    @pytest.mark.parametrize("funcs", SIMPLE, ids=["elemwise", "max", "median", "metrics"])
    def test_same_bytes_and_round_trip(self, funcs, tmp_path):
        theirs, mine = accuracy(pg, funcs), accuracy(ours, funcs)
        assert bool(theirs) == bool(mine)
        assert mine.to_json() == theirs.to_json()
        mine.save(str(tmp_path / "acc.json"))
        loaded = ours.AccuracyResults.load(str(tmp_path / "acc.json"))
        assert loaded.to_json() == theirs.to_json() and bool(loaded) == bool(theirs)
        pg_loaded = pg.AccuracyResults.load(str(tmp_path / "acc.json"))
        assert bool(pg_loaded) == bool(theirs)
        assert ours.AccuracyResults.from_json(theirs.to_json()).to_json() == theirs.to_json()

    def test_shape_mismatch_and_indices_are_bare_bools_in_json(self):
        def funcs(m):
            return [m.SimpleCompareFunc(), m.IndicesCompareFunc()]

        def acc(m):
            a, b = both(m, a={"i": np.array([[0, 1]], np.int32)}, b={"i": np.array([0, 1, 2], np.int32)})
            return m.Comparator.compare_accuracy(m.RunResults([("a", [a]), ("b", [b])]), compare_func=funcs(m))

        assert acc(ours).to_json() == acc(pg).to_json()

    def test_reevaluate_and_describe_average(self):
        def funcs(m):
            return [m.SimpleCompareFunc(check_error_stat="max"), m.L2CompareFunc(l2_threshold=1.0)]

        theirs, mine = accuracy(pg, funcs), accuracy(ours, funcs)
        new = [pg.L2Threshold(0.1), pg.SimpleThreshold("mean", 1.0, 1.0)]
        mine_new = [ours.L2Threshold(0.1), ours.SimpleThreshold("mean", 1.0, 1.0)]
        theirs.reevaluate(new, aggregation="average")
        mine.reevaluate(mine_new, aggregation="average")
        assert [bool(r) for r in mine] == [bool(r) for r in theirs] == [False, True]
        assert mine[0].describe_average() == theirs[0].describe_average()
        assert mine[1].describe_average() == theirs[1].describe_average() == OrderedDict()
        with pytest.raises(GateError, match="No saved comparison results match"):
            accuracy(ours, funcs).reevaluate([ours.PsnrThreshold(1.0)])


class TestCompareFunctions:
    @pytest.mark.parametrize("stat", ["elemwise", "max", "mean", "quantile"])
    def test_medians_filled_by_default(self, stat):
        a, b = np.array([1, 2, 3, 4.5, 7], F32), np.array([1, 2.5, 3, 4, 6], F32)
        mine = ours.SimpleCompareFunc(check_error_stat=stat)(*both(ours, a={"y": a}, b={"y": b}))["y"]
        theirs = pg.SimpleCompareFunc(check_error_stat=stat)(*both(pg, a={"y": a}, b={"y": b}))["y"]
        assert (mine.median_absdiff, mine.median_reldiff) == (theirs.median_absdiff, theirs.median_reldiff)
        fast = ours.SimpleCompareFunc(check_error_stat=stat, compute_medians=False)
        assert fast(*both(ours, a={"y": a}, b={"y": b}))["y"].median_absdiff is None

    def test_check_shapes_false_permutes_like_polygraphy(self):
        a = np.arange(6, dtype=F32).reshape(2, 3)
        b = a.T.copy() + 0.5
        mine = ours.SimpleCompareFunc(check_shapes=False)(*both(ours, a={"y": a}, b={"y": b}))["y"]
        theirs = pg.SimpleCompareFunc(check_shapes=False)(*both(pg, a={"y": a}, b={"y": b}))["y"]
        assert mine.max_absdiff == theirs.max_absdiff and mine.mean_absdiff == theirs.mean_absdiff
        assert bool(mine) == bool(theirs)
        strict = ours.SimpleCompareFunc()(*both(ours, a={"y": a}, b={"y": b}))["y"]
        assert not strict and "shape" in strict.error  # D8

    def test_indices_result_compares_with_true(self):
        a, b = both(ours, a={"i": np.array([0, 1, 2], np.int32)}, b={"i": np.array([1, 0, 2], np.int32)})
        assert ours.IndicesCompareFunc(index_tolerance=1)(a, b)["i"] == True  # noqa: E712 (Polygraphy's idiom)
        assert ours.IndicesCompareFunc()(a, b)["i"] == False  # noqa: E712

    def test_invalid_stat_wording(self):
        with pytest.raises(GateError, match="Invalid choice for check_error_stat: p99"):
            ours.SimpleCompareFunc(check_error_stat="p99")

    def test_base_classes(self):
        result = ours.SimpleCompareFunc()(*both(ours, a={"y": np.ones(2, F32)}, b={"y": np.ones(2, F32)}))["y"]
        assert isinstance(result, ours.CompareResult) and isinstance(result.thresholds, ours.Threshold)
        assert result.metric_fields() == pg.OutputCompareResult.metric_fields()
        assert ours.L2Result.metric_fields() == pg.L2Result.metric_fields() == ["l2_norm"]
        for cls in (ours.SimpleCompareFunc, ours.IndicesCompareFunc, ours.L2CompareFunc):
            assert issubclass(cls, ours.BaseCompareFunc)

        class Exact(ours.BaseCompareFunc):
            def __call__(self, r0, r1):
                return OrderedDict((name, bool(np.array_equal(r0[name], r1[name]))) for name in r0)

        run = ours.RunResults([("a", both(ours, a={"y": np.ones(2)})), ("b", both(ours, b={"y": np.ones(2)}))])
        assert ours.Comparator.compare_accuracy(run, compare_func=Exact())

    def test_thresholds_take_metric_value_mappings(self):
        for name, args, values in (
            ("SimpleThreshold", ("max", 0.1, 0.1), {"max_absdiff": 0.2, "max_reldiff": 0.05}),
            ("L2Threshold", (1.0,), {"l2_norm": 1.0}),
            ("PsnrThreshold", (30.0,), {"psnr": 29.999}),
            ("LpipsThreshold", (0.1,), {"lpips": None}),
        ):
            mine, theirs = getattr(ours, name)(*args), getattr(pg, name)(*args)
            assert mine.passed(values) == theirs.passed(values), name
            assert mine.describe(values) == theirs.describe(values), name
            assert mine.metric_fields() == theirs.metric_fields(), name

    def test_perceptual_metrics_without_torch_is_an_error_as_in_polygraphy(self):
        pytest.importorskip("polygraphy")
        try:
            import torch  # noqa: F401

            pytest.skip("torch is installed here")
        except ImportError:
            pass
        x = np.random.RandomState(0).random_sample((1, 3, 8, 8)).astype(F32)
        with pytest.raises(PolygraphyException, match="Module: 'torch' is required"):
            pg.PerceptualMetricsCompareFunc()(*both(pg, a={"img": x}, b={"img": x * 0.5}))
        with pytest.raises(GateError, match="Module: 'torch' is required"):
            ours.PerceptualMetricsCompareFunc()(*both(ours, a={"img": x}, b={"img": x * 0.5}))
        mine, theirs = ours.PerceptualMetricsCompareFunc(), pg.PerceptualMetricsCompareFunc()
        assert mine.thresholds_for("img").threshold == theirs.thresholds_for("img").threshold == 0.1
        assert ours.PerceptualMetricsResult(None, ours.LpipsThreshold(0.1))  # None passes (Polygraphy)


class TestDeprecated:
    @pytest.mark.parametrize(
        "call",
        [
            lambda m: m.CompareFunc.simple(atol=0.5),
            lambda m: m.CompareFunc.indices(index_tolerance=1),
            lambda m: m.CompareFunc.perceptual_metrics(lpips_threshold=0.2),
            lambda m: m.PostprocessFunc.top_k(k=2),
        ],
        ids=["simple", "indices", "perceptual_metrics", "top_k"],
    )
    def test_same_deprecation_warning_and_object(self, call):
        with warnings.catch_warnings(record=True) as theirs_w:
            warnings.simplefilter("always")
            theirs = call(pg)
        with warnings.catch_warnings(record=True) as mine_w:
            warnings.simplefilter("always")
            mine = call(ours)
        assert [str(w.message) for w in mine_w] == [
            str(w.message) for w in theirs_w if w.category is DeprecationWarning
        ]
        assert all(w.category is DeprecationWarning for w in mine_w) and mine_w
        assert type(mine).__name__ == type(theirs).__name__
        assert {k for k in vars(theirs) if not k.startswith("_")} <= set(vars(mine))

    def test_top_k_postprocess_same_indices(self):
        arr = np.array([[5, 6, 5], [6, 5, 6]], F32)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            mine = ours.PostprocessFunc.top_k(k={"": (1, 0)})(ours.IterationResult({"x": arr.copy()}))
            theirs = pg.PostprocessFunc.top_k(k={"": (1, 0)})(pg.IterationResult({"x": arr.copy()}))
        np.testing.assert_array_equal(mine["x"], theirs["x"])
        assert isinstance(ours.TopKPostprocessFunc(), ours.BasePostprocessFunc)

    def test_percentage_warns_like_polygraphy(self):
        with warnings.catch_warnings(record=True) as theirs_w:
            warnings.simplefilter("always")
            theirs = pg.AccuracyResult().percentage()
        with pytest.warns(DeprecationWarning) as mine_w:
            mine = ours.AccuracyResult().percentage()
        assert mine == theirs == 1.0
        assert [str(w.message) for w in mine_w] == [str(w.message) for w in theirs_w]


class TestLazyArrayAndHelpers:
    def test_lazy_array_kept_or_swapped(self, monkeypatch):
        small = np.ones(16, np.uint8)
        lazy = LazyArray(small)
        assert lazy.arr is small and lazy.tmpfile is None and lazy.load() is small
        monkeypatch.setattr("gate.comparator.struct.ARRAY_SWAP_THRESHOLD_MB", 0)
        big = np.arange(300_000, dtype=np.int32)
        lazy = LazyArray(big)
        assert lazy.arr is None and lazy.tmpfile is not None
        np.testing.assert_array_equal(lazy.load(), big)
        from polygraphy.json import load_json

        np.testing.assert_array_equal(load_json(lazy.tmpfile.name), big)  # Polygraphy reads our swap file
        assert pg_struct.LazyArray(small).load() is small

    def test_run_comparison_and_find_output(self):
        def match(n0, o0, n1, o1):
            return bool(np.array_equal(o0, o1))

        for m, mod in ((our_funcs, ours), (pg_compare, pg)):
            r0, r1 = both(mod, a={"out": np.ones(2), "other": np.zeros(1)}, b={"OUT_0": np.ones(2), "x": np.ones(1)})
            found = m.default_find_output_func("out", 0, r1, base_iter_result=r0)
            assert found == ["OUT_0"]
            status = m.run_comparison(match, False, r0, r1, lambda n, i, r: [n.upper() + "_0"] if n == "out" else None)
            assert list(status) == ["out"] and status["out"] is True
        assert our_funcs.metric_fields_for_func(ours.IndicesCompareFunc()) == []
        assert our_funcs.metric_fields_for_func(ours.L2CompareFunc()) == pg_compare.metric_fields_for_func(
            pg.L2CompareFunc()
        )
        assert our_funcs.metric_fields_for_func(lambda a, b: {}) is None
        assert ours.Comparator.default_comparisons(run_results(ours)) == pg.Comparator.default_comparisons(
            run_results(pg)
        )

    def test_comparator_util_statistics(self):
        from polygraphy.comparator import util as pg_util

        from gate.comparator import util as our_util

        x = np.array([[1, -2.5], [3, 0.25]], np.float16)
        for name in ("compute_max", "compute_min", "compute_median", "compute_std", "compute_variance"):
            assert getattr(our_util, name)(x) == getattr(pg_util, name)(x), name
        assert our_util.compute_argmax(x) == pg_util.compute_argmax(x)
        assert our_util.compute_quantile(x, 0.25) == pg_util.compute_quantile(x, 0.25)
        assert our_util.compute_mean(x) == pytest.approx(float(pg_util.compute_mean(x)), rel=1e-6)  # D3


def _two_runner_run(module):
    a, b = both(module, a={"y": np.array([1.0, np.nan], F32)}, b={"y": np.array([1.0, 2.0], F32)})
    return module.RunResults([("a", [a]), ("b", [b])])


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda m: m.Comparator.run([], warm_up=1, streaming=True), "streaming=True does not support warm_up"),
        (
            lambda m: m.Comparator.compare_accuracy(_two_runner_run(m), check_average=True, fail_fast=True),
            "check_average and fail_fast cannot be used together",
        ),
        (
            lambda m: m.Comparator.compare_accuracy(_two_runner_run(m), check_average=True),
            "check_average is not supported with check_error_stat='elemwise'",
        ),
        (
            lambda m: m.Comparator.compare_accuracy(
                _two_runner_run(m), check_average=True, compare_func=m.IndicesCompareFunc()
            ),
            "does not produce averageable metrics and cannot be used with check_average=True",
        ),
        (
            lambda m: m.Comparator.compare_accuracy(
                _two_runner_run(m), check_average=True, compare_func=lambda r0, r1: {}
            ),
            "does not support average comparison",
        ),
        (lambda m: list(m.Comparator.validate(iter([_two_runner_run(m)]))), "Output validation failed: iteration 0"),
        (
            lambda m: m.Comparator.compare_accuracy(
                iter([_two_runner_run(m), m.RunResults([("a", _two_runner_run(m)["a"])] * 2)])
            ),
            "Streamed iteration 1 contains a different set of runners than the first",
        ),
    ],
    ids=[
        "streaming-warm-up",
        "average-fail-fast",
        "average-elemwise",
        "average-indices",
        "average-plain",
        "validate",
        "runners-change",
    ],
)
def test_comparator_errors_worded_as_polygraphy(call, message):
    with pytest.raises(PolygraphyException, match=message):
        call(pg)
    with pytest.raises(GateError, match=message):
        call(ours)
