"""``Comparator``: runs runners over a data loader and compares their outputs.

The API follows Polygraphy 0.53.6 ``Comparator`` (``shared/spec/seeds/comparator-api.txt``;
behaviour in ``shared/spec/polygraphy-0.53.6.md`` sections 1 and 2). Deviations: iteration counts
that differ between compared streams are an error naming both counts (D6).
"""

from __future__ import annotations

import contextlib
import copy
import itertools
import logging
import os
from collections.abc import Iterable, Iterator

import numpy as np

from gate.comparator.compare import SimpleCompareFunc
from gate.comparator.data_loader import DataLoader, check_feed_dict, coerce_feed_dict
from gate.comparator.serde import save_run_results
from gate.comparator.struct import AccuracyResult, AccuracyResults, IterationResult, RunResults
from gate.comparator.subprocess_run import run_in_subprocess
from gate.comparator.writer import InputBlobWriter, IterationWriter, is_single_file
from gate.errors import GateError

log = logging.getLogger("gate.comparator")


def _check_feed_dict(feed_dict, index):
    try:
        check_feed_dict(feed_dict)
    except GateError as err:
        raise GateError(f"Input iteration {index}: {err}") from None


def _set_loader_metadata(data_loader, runner):
    if hasattr(data_loader, "input_metadata"):
        with contextlib.suppress(AttributeError):
            data_loader.input_metadata = runner.get_input_metadata()


def _check_save_paths(save_inputs_path, save_outputs_path, save_input_blob_path=None):
    paths = (save_inputs_path, save_outputs_path, save_input_blob_path)
    for i, j in ((0, 1), (0, 2), (1, 2)):
        if paths[i] is not None and paths[j] is not None and os.path.realpath(paths[i]) == os.path.realpath(paths[j]):
            raise GateError(
                "Two of save_inputs_path, save_outputs_path, and save_input_blob_path resolve to the same path "
                f"('{paths[i]}'). Use distinct paths."
            )


def _coerce(feed_dict, metadata):
    """The feed_dict as this runner expects it (exact names, lossless casts; spec 1.4). A runner that
    declares no inputs (e.g. one replaying stored outputs) gets the feed_dict as it is."""
    return coerce_feed_dict(feed_dict, metadata) if metadata else feed_dict


def _execute_runner(runner, data_loader, cache, warm_up):
    """Runs one runner over every feed_dict (materialized mode); returns ``(iterations, cache)``.

    ``cache`` is None for the first runner: the loader is then materialized here, after the runner is
    active, so that a loader with ``input_metadata`` can size its inputs from it. Module-level so that
    a ``spawn`` child can run it.
    """
    with runner:
        metadata = runner.get_input_metadata()
        if cache is None:
            _set_loader_metadata(data_loader, runner)
            cache = list(data_loader)
            if cache:
                _check_feed_dict(cache[0], 0)
            else:
                log.warning("Data loader did not yield any input data.")
        if warm_up and not cache:
            log.warning("%d warm-up run(s) were requested, but the data loader supplied no data.", warm_up)
        for _ in range(warm_up if cache else 0):
            runner.infer(_coerce(cache[0], metadata))
        iterations = []
        for feed_dict in cache:
            outputs = runner.infer(_coerce(feed_dict, metadata))
            # One iteration keeps the runner's own arrays (Polygraphy's behaviour, spec case 33).
            if len(cache) > 1:
                outputs = copy.deepcopy(outputs)
            iterations.append(IterationResult(outputs, runner.last_inference_time(), runner.name))
        if not iterations:
            log.warning("%s ran zero iterations: the data loader is empty.", runner.name)
        return iterations, cache


class Comparator:
    """Runs runners and compares their outputs (Polygraphy-compatible static methods)."""

    @staticmethod
    def run(
        runners,
        data_loader=None,
        warm_up=None,
        use_subprocess=None,
        subprocess_timeout=None,
        subprocess_polling_interval=None,
        save_inputs_path=None,
        save_outputs_path=None,
        save_input_blob_path=None,
        streaming=None,
    ):
        """Runs ``runners`` over the feed_dicts (``name -> numpy.ndarray``) of ``data_loader``.

        Materialized (default): each runner runs to completion, one after the other; returns a
        RunResults holding every runner and every iteration (outputs are copied when there is more
        than one iteration, since runners may reuse their output buffers). The loader is read once,
        while the first runner is active (its ``input_metadata`` is set first, when it has one). An
        empty loader gives each runner zero iterations, with a warning (Polygraphy 0.53.6 raises
        UnboundLocalError there); no runners give an empty RunResults.

        ``streaming=True``: returns a generator; at the first ``next()`` all runners are activated
        at once, then one single-iteration RunResults (every runner, in order) is yielded per
        feed_dict. The arrays yielded may be runner-owned buffers that the next ``infer`` reuses:
        use (compare or save) each item before asking for the next. Nothing is copied.

        ``use_subprocess=True`` (materialized only): each runner runs in its own ``spawn`` child
        process (``gate.comparator.subprocess_run``), so the runners and the data loader must be
        picklable (no generators, lambdas or local classes), and a script that uses it must guard
        its entry point with ``if __name__ == "__main__":``. The caller's runners and loader are
        never modified: the children work on copies. ``subprocess_timeout`` (seconds, default None)
        bounds each child's run; ``subprocess_polling_interval`` (seconds, default 30; 0 disables
        the periodic checks) is how often a running child is checked. A child that crashes or hangs
        is reported at once or at the timeout, never waited on forever.

        Saving (Polygraphy 0.53.6, ``shared/spec/polygraphy-0.53.6.md`` section 1.5; the format is
        ``gate.comparator.serde``): a path with an extension (``os.path.splitext(path)[1] != ""``)
        is one JSON file, any other path a directory of ``<index:010d>.json`` files that must not
        exist or be empty. ``save_inputs_path`` gets the feed_dicts as the loader gave them (a JSON
        list, or one feed_dict per file); ``save_outputs_path`` gets a RunResults (one file) or one
        single-iteration RunResults per file. Materialized mode writes after every runner has run
        (inputs only when there are runners; outputs even with none, ``{"lst": []}``). Streaming
        writes a directory as each iteration is produced; a single file keeps deep copies of every
        iteration (one warning) and is written when the generator finishes, is closed, or fails.
        ``save_input_blob_path``: a directory where each feed_dict's arrays are also written raw
        (``ndarray.tofile``) as ``<index:010d>/<input name>.bin`` (``writer.InputBlobWriter``).

        Returns:
            RunResults, or (``streaming=True``) a generator of single-iteration RunResults.

        Raises:
            GateError: (at call time) ``warm_up`` or ``use_subprocess`` with ``streaming=True``;
                ``save_inputs_path`` and ``save_outputs_path`` resolving to the same real path.
                (While running) a feed_dict that is not a mapping of str to array; a save directory
                that is an existing file or is not empty (streaming: at the first ``next()``; after
                inference in materialized mode); a subprocess that cannot start, fails, exits
                (exit code) or times out, naming the runner.
        """
        _check_save_paths(save_inputs_path, save_outputs_path, save_input_blob_path)
        if streaming:
            if warm_up:
                raise GateError(
                    "streaming=True does not support warm_up or use_subprocess. Set streaming=False to use them "
                    "(warm_up is not supported with streaming=True)."
                )
            if use_subprocess:
                raise GateError(
                    "streaming=True does not support warm_up or use_subprocess. Set streaming=False to use them "
                    "(use_subprocess is not supported with streaming=True, which runs all runners at once)."
                )
            return Comparator._run_streaming(
                list(runners), data_loader, save_inputs_path, save_outputs_path, save_input_blob_path
            )
        return Comparator._run_materialized(
            list(runners),
            data_loader,
            warm_up or 0,
            bool(use_subprocess),
            subprocess_timeout,
            30 if subprocess_polling_interval is None else subprocess_polling_interval,
            save_inputs_path,
            save_outputs_path,
            save_input_blob_path,
        )

    @staticmethod
    def _run_streaming(
        runners, data_loader, save_inputs_path=None, save_outputs_path=None, save_input_blob_path=None
    ) -> Iterator[RunResults]:
        if not runners:
            log.warning("No runners were provided to Comparator.run(); nothing will run.")
            return
        data_loader = DataLoader() if data_loader is None else data_loader
        with contextlib.ExitStack() as stack:
            for runner in runners:
                stack.enter_context(runner)
            metadata = [runner.get_input_metadata() for runner in runners]
            _set_loader_metadata(data_loader, runners[0])
            # Built once the runners are active, as Polygraphy does; single files keep deep copies
            # because runners and loaders may reuse their buffers.
            input_writer = IterationWriter(save_inputs_path, copy_on_accumulate=True, description="inputs")
            output_writer = IterationWriter(
                save_outputs_path, combine=RunResults.concat, copy_on_accumulate=True, description="outputs"
            )
            blob_writer = InputBlobWriter(save_input_blob_path)
            try:
                for index, feed_dict in enumerate(data_loader):
                    _check_feed_dict(feed_dict, index)
                    if index == 1 and (input_writer.single_file or output_writer.single_file):
                        log.warning(
                            "Saving streamed results to a single file accumulates every iteration in memory; "
                            "pass a directory (a path without an extension) to keep memory constant."
                        )
                    input_writer.append(feed_dict)
                    blob_writer.append(feed_dict)
                    run = RunResults()
                    for runner, meta in zip(runners, metadata):
                        outputs = runner.infer(_coerce(feed_dict, meta))
                        run.lst.append(
                            (runner.name, [IterationResult(outputs, runner.last_inference_time(), runner.name)])
                        )
                    output_writer.append(run)
                    yield run
            finally:
                input_writer.flush()
                output_writer.flush()

    @staticmethod
    def _run_materialized(
        runners,
        data_loader,
        warm_up,
        use_subprocess=False,
        subprocess_timeout=None,
        subprocess_polling_interval=30,
        save_inputs_path=None,
        save_outputs_path=None,
        save_input_blob_path=None,
    ) -> RunResults:
        results = RunResults()
        cache = None
        if not runners:
            log.warning("No runners were provided to Comparator.run(); the results are empty.")
        elif data_loader is None:
            data_loader = DataLoader()
        for runner in runners:
            args = (runner, data_loader if cache is None else None, cache, warm_up)
            if use_subprocess:
                iterations, cache = run_in_subprocess(
                    runner.name, _execute_runner, args, subprocess_timeout, subprocess_polling_interval
                )
            else:
                iterations, cache = _execute_runner(*args)
            results.lst.append((runner.name, iterations))

        if save_input_blob_path is not None and runners:
            blob_writer = InputBlobWriter(save_input_blob_path)
            for feed_dict in cache:
                blob_writer.append(feed_dict)
        if save_inputs_path is not None and runners:
            with IterationWriter(save_inputs_path, description="inputs") as writer:
                for feed_dict in cache:
                    writer.append(feed_dict)
        if save_outputs_path is not None:
            if is_single_file(save_outputs_path):
                # Saved as is: split() + concat() would merge runners that share a name.
                save_run_results(results, save_outputs_path)
            else:
                with IterationWriter(save_outputs_path, description="outputs") as writer:
                    for single in results.split():
                        writer.append(single)
        return results

    @staticmethod
    def default_comparisons(run_results):
        """``[(0, 1), (1, 2), ...]``: each runner against the next (Polygraphy's default pairs)."""
        return [(i, i + 1) for i in range(len(run_results) - 1)]

    @staticmethod
    def postprocess(run_results, postprocess_func):
        """Applies ``postprocess_func(IterationResult) -> IterationResult`` to every iteration of a
        RunResults (in place, returned), a stream (a lazy generator) or a list of either (a new
        list)."""
        if isinstance(run_results, RunResults):
            for index, (name, iterations) in enumerate(run_results.lst):
                run_results.lst[index] = (name, [postprocess_func(it) for it in iterations])
            return run_results
        if isinstance(run_results, (list, tuple)):
            return [Comparator.postprocess(r, postprocess_func) for r in run_results]

        def stream():
            try:
                for run in run_results:
                    yield Comparator.postprocess(run, postprocess_func)
            finally:
                if hasattr(run_results, "close"):
                    run_results.close()

        return stream()

    @staticmethod
    def validate(run_results, check_inf=None, check_nan=None, fail_fast=None):
        """Checks outputs for NaN (``check_nan``, default True) and non-finite values
        (``check_inf``, default False).

        Returns: for a RunResults, True when every output is valid; for a list, a list of results;
        for a stream, a lazy pass-through that raises at the first invalid item.

        Raises:
            GateError: (streams) an output holds NaN or Inf; the message names the iteration,
                runner and output.
        """
        check_inf = bool(check_inf)
        check_nan = True if check_nan is None else bool(check_nan)

        def invalid_outputs(run):
            for name, iterations in run.items():
                for index, it in enumerate(iterations):
                    for out, arr in it.items():
                        arr = np.asarray(arr)
                        if arr.size == 0 or not np.issubdtype(arr.dtype, np.inexact):
                            continue
                        if (check_nan and np.isnan(arr).any()) or (check_inf and not np.isfinite(arr).all()):
                            yield name, index, out

        if isinstance(run_results, RunResults):
            valid = True
            for name, index, out in invalid_outputs(run_results):
                log.error("Invalid output: runner '%s', iteration %d, output '%s'", name, index, out)
                valid = False
                if fail_fast:
                    break
            return valid
        if isinstance(run_results, (list, tuple)):
            return [Comparator.validate(r, check_inf, check_nan, fail_fast) for r in run_results]

        def stream():
            try:
                for index, run in enumerate(run_results):
                    for name, _, out in invalid_outputs(run):
                        kind = "NaN or Inf" if check_inf else "NaN"
                        err = GateError(
                            f"Output validation failed: iteration {index} contains invalid values (NaNs/Infs): "
                            f"runner '{name}', output '{out}' contains {kind}."
                        )
                        err.output = out  # which output stopped the stream, for the reports
                        raise err
                    yield run
            finally:
                if hasattr(run_results, "close"):
                    run_results.close()

        return stream()

    @staticmethod
    def compare_accuracy(run_results, fail_fast=False, comparisons=None, compare_func=None, check_average=False):
        """Compares runners pairwise, iteration by iteration, with one or more compare functions.

        ``run_results``: a RunResults, a stream of single-iteration RunResults, or a list of either
        (each entry is one run; runs are zipped iteration by iteration, and each runner of a
        RunResults is its own run). Memory stays constant for streams: only the per-output results
        (a few floats) are kept.

        Returns:
            AccuracyResults: one AccuracyResult per compare function.

        Raises:
            GateError: ``check_average`` with ``fail_fast``, or with a compare function that has no
                averageable metric (elemwise, indices, a plain function); runs with different
                numbers of iterations (D6, both counts named); the set of runners changing between
                iterations.
        """
        funcs = list(compare_func) if isinstance(compare_func, (list, tuple)) else [compare_func]
        funcs = [SimpleCompareFunc() if f is None else f for f in funcs]
        if check_average:
            _check_averageable(funcs, fail_fast)
        accuracy = [AccuracyResult(aggregation="average" if check_average else "per_sample") for _ in funcs]

        streams = _to_streams(run_results)
        names = None
        pairs = None
        count = 0
        try:
            for items in itertools.zip_longest(*streams, fillvalue=_END):
                ended = [item is _END for item in items]
                if any(ended):
                    if not all(ended):
                        _raise_count_mismatch(streams, items, count)
                    break
                merged = _merge_iteration(items)
                if names is None:
                    names = [name for name, _ in merged]
                    pairs = (
                        list(comparisons) if comparisons is not None else [(i, i + 1) for i in range(len(names) - 1)]
                    )
                elif [name for name, _ in merged] != names:
                    raise GateError(
                        f"Streamed iteration {count} contains a different set of runners than the first "
                        f"({[n for n, _ in merged]} vs. {names}). Every iteration must contain the same runners "
                        "in the same order."
                    )
                failed = False
                for i, j in pairs:
                    key = (names[i], names[j])
                    for func, acc in zip(funcs, accuracy):
                        result = func(merged[i][1], merged[j][1])
                        acc.setdefault(key, []).append(result)
                        failed = failed or not all(bool(r) for r in result.values())
                    if fail_fast and failed:
                        return AccuracyResults(accuracy)
                count += 1
        finally:
            for stream in streams:
                if hasattr(stream, "close"):
                    stream.close()
        return AccuracyResults(accuracy)


class _End:
    pass


_END = _End()


def _check_averageable(funcs, fail_fast):
    if fail_fast:
        raise GateError("check_average and fail_fast cannot be used together.")
    for func in funcs:
        name = getattr(func, "__name__", type(func).__name__)
        if not hasattr(func, "thresholds_for"):
            raise GateError(
                f"The provided compare_func ({name}) does not support average comparison. Use a compare_func "
                "that produces averageable metrics (sets _RESULT_CLASS and implements thresholds_for) with "
                "check_average=True."
            )
        try:
            threshold = func.thresholds_for("")
        except NotImplementedError as err:
            raise GateError(
                f"The selected compare_func ({name}) does not produce averageable metrics and cannot be used with "
                "check_average=True."
            ) from err
        if getattr(threshold, "check_error_stat", None) == "elemwise":
            raise GateError(
                "check_average is not supported with check_error_stat='elemwise': it is a per-element check with no "
                "scalar statistic to average. Specify max, mean, median, or quantile."
            )


def _to_streams(run_results) -> list[Iterable]:
    runs = list(run_results) if isinstance(run_results, (list, tuple)) else [run_results]
    streams = []
    for run in runs:
        if isinstance(run, RunResults):
            for name, iterations in run.items():
                streams.append([RunResults([(name, [it])]) for it in iterations])
        else:
            streams.append(iter(run))
    return streams


def _merge_iteration(items) -> list[tuple[str, IterationResult]]:
    merged = []
    for item in items:
        if not isinstance(item, RunResults) or len(item) == 0:
            raise GateError(f"Expected a RunResults with at least one runner in the stream, got {item!r}.")
        for name, iterations in item.items():
            merged.append((name, iterations[0]))
    return merged


def _raise_count_mismatch(streams, items, compared):
    counts = []
    for stream, item in zip(streams, items):
        if isinstance(stream, list):
            counts.append(len(stream))
        elif item is _END:
            counts.append(compared)
        else:
            counts.append(f"more than {compared}")  # a live stream is not drained just to count it
    raise GateError(
        f"The compared runs have different numbers of iterations: {counts}; every run must have the same count."
    )
