"""``accuracy-gate merge``: the partial result files of the shards of one golden set, combined into
the run an unsharded ``check`` would have made.

Every shard's comparisons are put back in golden-set order, so ``gate.compared_run.result_of`` (the code
``check`` reports through) gives the same verdict and the same numbers: per-iteration results are
stored exactly, worst iterations are chosen in the same order, and ``check_average``'s averages are
``math.fsum`` sums (exactly rounded, so independent of the order they are added in) divided by the
same count.
"""

from __future__ import annotations

from collections import OrderedDict
from pathlib import Path

from gate.comparator.struct import AccuracyResult
from gate.compared_run import ComparedRun
from gate.errors import GateError
from gate.partial_file import read_partial
from gate.shards import Shard

MAX_PARTIALS = 1000


def partial_files(paths) -> list[Path]:
    """The partial result files named by ``paths``: each a file, or a folder whose ``*.json`` files
    (at any depth, as actions/download-artifact leaves them) are taken, sorted.

    Raises:
        GateError: a path that does not exist, a folder without ``.json`` files, or no path at all.
    """
    files: list[Path] = []
    for raw in paths:
        path = Path(raw)
        if path.is_file():
            files.append(path)
        elif path.is_dir():
            found = sorted(p for p in path.rglob("*.json") if p.is_file() and not p.is_symlink())
            if not found:
                raise GateError(f"{path}: the folder holds no .json partial result file.")
            files.extend(found)
        else:
            raise GateError(f"{path}: no such partial result file or folder.")
    if not files:
        raise GateError("no partial result files given; pass the files (or folders) every shard wrote.")
    if len(files) > MAX_PARTIALS:
        raise GateError(f"{len(files)} partial result files given; at most {MAX_PARTIALS}.")
    return files


def _first_difference(a: dict, b: dict, prefix: str = "") -> str:
    for key in sorted(set(a) | set(b)):
        if a.get(key) != b.get(key):
            if isinstance(a.get(key), dict) and isinstance(b.get(key), dict):
                return _first_difference(a[key], b[key], f"{prefix}{key}.")
            return f"{prefix}{key} {a.get(key)!r} vs {b.get(key)!r}"
    return "no visible setting"


def check_compatible(runs: list[tuple[str, ComparedRun]]) -> None:
    """All partials must be shards of one split of one golden set, made with one configuration and
    (when recorded) from one commit; every shard exactly once, each covering its iterations
    (``check_coverage``).

    Raises:
        GateError: one line naming the offending file and shard, or the missing shards.
    """
    first_source, first = runs[0]
    seen: dict[int, str] = {}
    for source, run in runs:
        label = f"{source}: shard {run.shard}"
        if run.shard.count != first.shard.count:
            raise GateError(
                f"{label} is from a split into {run.shard.count} shards, but {first_source} is shard {first.shard} "
                f"of a split into {first.shard.count}; pass the shards of one split."
            )
        if run.model != first.model:
            raise GateError(f"{label} is for model {run.model}, but {first_source} is for {first.model}.")
        if run.config_sha256 != first.config_sha256:
            raise GateError(
                f"{label} was made with another configuration than shard {first.shard} ({first_source}): "
                f"{_first_difference(run.settings, first.settings)}."
            )
        if run.golden != first.golden:
            what = (
                f"{run.golden['iterations']} iterations vs {first.golden['iterations']}"
                if run.golden["iterations"] != first.golden["iterations"]
                else "the golden files' names or sizes differ"
            )
            raise GateError(
                f"{label} was made on another golden set than shard {first.shard} ({first_source}): {what}."
            )
        if run.commit and first.commit and run.commit != first.commit:
            raise GateError(
                f"{label} was made from commit {run.commit[:12]}, shard {first.shard} ({first_source}) from "
                f"{first.commit[:12]}; pass the shards of one workflow run."
            )
        if run.shard.index in seen:
            raise GateError(f"{label} is given twice (also {seen[run.shard.index]}); pass each shard once.")
        check_coverage(source, run)
        seen[run.shard.index] = source
    missing = [Shard(i, first.shard.count) for i in range(1, first.shard.count + 1) if i not in seen]
    if missing:
        names = ", ".join(str(s) for s in missing)
        plural = "s" if len(missing) > 1 else ""
        raise GateError(
            f"missing shard{plural} {names}: got {len(seen)} of {first.shard.count} partial result files "
            f"({', '.join(str(Shard(i, first.shard.count)) for i in sorted(seen))}); a leg that failed to write "
            "its file must be re-run."
        )


def check_coverage(source: str, run: ComparedRun) -> None:
    """A shard's partial file must hold every iteration of its shard of the golden set (``k`` with
    ``k % n == i - 1``, each once, for the ``golden.iterations`` of its fingerprint), unless it
    records that the run stopped early, and then only iterations in golden-set order from the first.
    A file from which an iteration was removed (its failing one, say) never merges to a pass.

    Raises:
        GateError: one line naming the file, the shard and the first missing or unexpected iteration.
    """
    expected = list(run.shard.indices(run.total))
    got = list(run.indices)
    if got == expected:
        return
    label = f"{source}: shard {run.shard}"
    if (run.stopped is not None or run.fail_fast_stop is not None) and got == expected[: len(got)]:
        return  # a shard stopped by an error or by --fail-fast (at its last iteration: gate.partial_file)
    extra = sorted(set(got) - set(expected))
    if extra or len(got) != len(set(got)):
        raise GateError(
            f"{label} holds iteration {extra[0] if extra else got} outside its iterations of the golden set of "
            f"{run.total}; the file was edited or is corrupt."
        )
    missing = [i for i in expected if i not in set(got)]
    raise GateError(
        f"{label} lacks {len(missing)} of its {len(expected)} iterations of the golden set of {run.total} "
        f"(first: iteration {missing[0]}) and does not say it stopped; the file was edited or is incomplete."
    )


def merge_runs(runs: list[tuple[str, ComparedRun]]) -> ComparedRun:
    """Combines shards (``(source, run)``, any order) into one run over the union of their iterations,
    in golden-set order (see the module docstring).

    Raises:
        GateError: the shards do not belong together (``check_compatible``), or mix aggregations.
    """
    check_compatible(runs)
    runs = sorted(runs, key=lambda item: item[1].shard.index)
    first = runs[0][1]
    count = first.shard.count
    aggregations = {run.accuracy.aggregation for _, run in runs}
    if len(aggregations) > 1:  # check_average is in the config fingerprint; a hand-made file only
        raise GateError(f"{runs[0][0]}: the shards mix per-iteration and averaged results.")
    by_index: dict[int, tuple[ComparedRun, int]] = {}
    for _, run in runs:
        for position, index in enumerate(run.indices):
            by_index[index] = (run, position)
    indices = sorted(by_index)
    stopped = next((run.stopped for _, run in runs if run.stopped is not None), None)
    fail_fast = [run for _, run in runs if run.fail_fast_stop is not None]
    if stopped is None and not fail_fast and indices != list(range(first.total)):  # check_compatible makes it so
        raise GateError(f"the shards cover {len(indices)} of the {first.total} iterations of the golden set.")
    scope = f"merged from {count} shard{'s' if count > 1 else ''}"
    early = [run for run in fail_fast if not run.complete]
    if early:  # the merge is regressed (gate.compared_run.result_of): say where the shards stopped
        stops = ", ".join(f"shard {run.shard} at iteration {run.fail_fast_stop}" for run in early)
        scope += f"; --fail-fast: {stops} stopped early, {len(indices)} of {first.total} iterations compared"
    accuracy = _merged(runs, indices, by_index, lambda run: run.accuracy, first.accuracy.aggregation)
    names = dict.fromkeys(name for _, run in runs for name in run.metrics)
    metrics = {
        name: _merged(runs, indices, by_index, lambda run, name=name: run.metrics.get(name, AccuracyResult()),
                      next(run.metrics[name].aggregation for _, run in runs if name in run.metrics))
        for name in names
    }  # fmt: skip
    where = {}
    for _, run in runs:
        where.update(run.where)
    return ComparedRun(
        model=first.model,
        title=first.title,
        settings=first.settings,
        golden=first.golden,
        shard=Shard(1, 1),
        indices=indices,
        accuracy=accuracy,
        metrics=metrics,
        golden_sha256=[
            by_index[i][0].golden_sha256[by_index[i][1]] if by_index[i][0].golden_sha256 else None for i in indices
        ],
        where=where,
        stopped=stopped,
        fail_fast_stop=min((run.fail_fast_stop for run in fail_fast), default=None),
        duration_s=sum(run.duration_s for _, run in runs),
        facts=dict(first.facts),
        commit=first.commit,
        scope=scope,
        config_path=first.config_path,
    )


def _merged(runs, indices, by_index, of, aggregation) -> AccuracyResult:
    """One AccuracyResult (``of(run)``: the simple one, or a compare function's) over every shard's
    iterations in golden-set order; pairs and outputs in first-seen order."""
    pairs: OrderedDict = OrderedDict()
    for _, run in runs:
        for pair in of(run):
            pairs.setdefault(pair, None)
    accuracy = AccuracyResult(aggregation=aggregation)
    for pair in pairs:
        order = _output_order(pair, indices, by_index, of)
        iterations = []
        for index in indices:
            run, position = by_index[index]
            results = of(run)[pair][position] if pair in of(run) else OrderedDict()
            iterations.append(OrderedDict((name, results[name]) for name in order if name in results))
        accuracy[pair] = iterations
    return accuracy


def _output_order(pair, indices, by_index, of) -> list[str]:
    """Output names in order of first appearance over the iterations in golden-set order."""
    names: dict[str, None] = {}
    for index in indices:
        run, position = by_index[index]
        if pair in of(run):
            names.update(dict.fromkeys(of(run)[pair][position]))
    return list(names)


def merge_files(paths) -> ComparedRun:
    """Reads every partial result file named by ``paths`` (files or folders) and merges them.

    Raises:
        GateError: a missing, corrupt or unsupported file, or shards that do not belong together,
            in one line naming the file or the missing shards.
    """
    files = partial_files(paths)
    return merge_runs([(str(path), read_partial(path)) for path in files])
