"""The compare functions' results (``gate.compare_funcs``) in a partial result file: the optional key
``funcs`` (``gate.partial_file``), written only when some output is checked by a function besides
``simple``, so that ``merge`` rebuilds every row exactly::

    "funcs": [{"func": "cosine" | "l2" | "mse" | "psnr" | "snr" | "indices",
               "aggregation": "per_sample" | "average",
               "pairs": [{"runners": [str, str],
                          "outputs": [{"output": str, "index": [int],
                                       "results": [{...} per iteration]}]}]}]

A metric's result is ``{"value", "threshold", "error", "num_elements", "dtypes", "shapes", "names"}``;
an indices result ``{"passed", "mismatch_count", "tie_count", "index_tolerance", "first_mismatch",
"error", "dtypes", "shapes", "names"}``. Numbers as in the rest of the file (``gate.strict_json``).
"""

from __future__ import annotations

from collections import OrderedDict

from gate.comparator.compare import OutputCompareResult
from gate.comparator.indices import IndicesCompareResult
from gate.comparator.output_funcs import MseCompareFunc
from gate.comparator.struct import AccuracyResult
from gate.compare_funcs import METRIC_FUNCS
from gate.errors import GateError
from gate.strict_json import json_int, json_number, number_from_json
from gate.task_metrics import TaskResult

RESULT_TYPES = {name: func.result_type for name, func in METRIC_FUNCS.items()} | {"mse": MseCompareFunc.result_type}


def _common(result) -> dict:
    return {
        "error": None if result.error is None else str(result.error),
        "dtypes": None if result.dtypes is None else [str(d) for d in result.dtypes],
        "shapes": None if result.shapes is None else [[int(d) for d in s] for s in result.shapes],
        "names": [result.output0_name, result.output1_name],
    }


def encode_result(name: str, result) -> dict:
    """One iteration's result of compare function ``name`` as JSON."""
    if isinstance(result, OutputCompareResult):  # an output only one side has
        return {"missing": str(result.error or ""), "names": [result.output0_name, result.output1_name]}
    if name == "task":
        return {"correct": bool(result.correct), "reference_correct": bool(result.reference_correct),
                **_common(result)}  # fmt: skip
    if name == "indices":
        first = result.first_mismatch
        return {"passed": bool(result.passed), "mismatch_count": int(result.mismatch_count),
                "tie_count": int(result.tie_count), "index_tolerance": int(result.index_tolerance),
                "first_mismatch": None if first is None else [list(first[0]), int(first[1])],
                **_common(result)}  # fmt: skip
    return {"value": json_number(result.value), "threshold": json_number(result.thresholds.threshold),
            "num_elements": json_int(result.num_elements), **_common(result)}  # fmt: skip


def funcs_document(metrics: dict, indices: list[int]) -> list[dict]:
    """The ``funcs`` entry of a ComparedRun's ``metrics`` (``indices``: golden-set index per position)."""
    document = []
    for name, accuracy in metrics.items():
        pairs = []
        for pair, iterations in accuracy.items():
            outputs = []
            for output in accuracy.output_names(pair):
                samples = [(indices[j], it[output]) for j, it in enumerate(iterations) if output in it]
                outputs.append({"output": output, "index": [i for i, _ in samples],
                                "results": [encode_result(name, r) for _, r in samples]})  # fmt: skip
            pairs.append({"runners": [str(pair[0]), str(pair[1])], "outputs": outputs})
        document.append({"func": name, "aggregation": accuracy.aggregation, "pairs": pairs})
    return document


def _decode(name: str, data: dict, fail):
    from gate.comparator.compare import missing_output_result

    if not isinstance(data, dict):
        raise fail("an object")
    names = data.get("names") or [None, None]
    if "missing" in data:
        result = missing_output_result(names[0] if isinstance(names, list) else None, "")
        result.error = str(data["missing"])
        return result
    shapes = data.get("shapes")
    common = {
        "error": data.get("error"),
        "dtypes": None if data.get("dtypes") is None else tuple(data["dtypes"]),
        "shapes": None if shapes is None else tuple(tuple(s) for s in shapes),
        "output0_name": names[0],
        "output1_name": names[1],
    }
    try:
        if name == "task":
            if not (isinstance(data["correct"], bool) and isinstance(data["reference_correct"], bool)):
                raise TypeError("correct and reference_correct must be booleans")
            return TaskResult(data["correct"], data["reference_correct"], **common)
        if name == "indices":
            first = data.get("first_mismatch")
            return IndicesCompareResult(passed=bool(data["passed"]), mismatch_count=int(data["mismatch_count"]),
                                        tie_count=int(data["tie_count"]), index_tolerance=int(data["index_tolerance"]),
                                        first_mismatch=None if first is None else (tuple(first[0]), int(first[1])),
                                        **common)  # fmt: skip
        result_type = RESULT_TYPES[name]
        threshold = result_type.threshold_type(number_from_json(data["threshold"]))
        return result_type(number_from_json(data["value"]), threshold, num_elements=data.get("num_elements"), **common)
    except (KeyError, TypeError, ValueError, IndexError) as err:
        raise fail(f"a {name} result ({type(err).__name__}: {err})") from err


def read_funcs(data, source: str, indices: list[int]) -> dict:
    """The ``funcs`` entry back into ``{name: AccuracyResult}`` aligned with ``indices``.

    Raises:
        GateError: a malformed entry, naming the file and where.
    """
    if data is None:
        return {}

    def failer(where):
        return lambda expected: GateError(f"{source}: '{where}' must be {expected}; not a valid partial result file.")

    if not isinstance(data, list):
        raise failer("funcs")("a list")
    position = {index: j for j, index in enumerate(indices)}
    metrics = {}
    for f, entry in enumerate(data):
        where = f"funcs[{f}]"
        if not isinstance(entry, dict) or entry.get("func") not in (*RESULT_TYPES, "indices", "task"):
            raise failer(f"{where}.func")(f"one of {', '.join((*RESULT_TYPES, 'indices', 'task'))}")
        name = entry["func"]
        aggregation = entry.get("aggregation")
        if aggregation not in ("per_sample", "average"):
            raise failer(f"{where}.aggregation")('"per_sample" or "average"')
        accuracy = AccuracyResult(aggregation=aggregation)
        for p, pair in enumerate(entry.get("pairs") or []):
            runners = pair.get("runners") if isinstance(pair, dict) else None
            if not (isinstance(runners, list) and len(runners) == 2 and all(isinstance(r, str) for r in runners)):
                raise failer(f"{where}.pairs[{p}].runners")("two runner names")
            iterations = [OrderedDict() for _ in indices]
            for o, output in enumerate(pair.get("outputs") or []):
                spot = f"{where}.pairs[{p}].outputs[{o}]"
                if not isinstance(output, dict) or not isinstance(output.get("output"), str):
                    raise failer(spot)("an object with an output name")
                index, results = output.get("index"), output.get("results")
                if not (isinstance(index, list) and isinstance(results, list) and len(index) == len(results)):
                    raise failer(spot)("index and results lists of one length")
                for i, data_i in zip(index, results):
                    if i not in position:
                        raise failer(f"{spot}.index")("indices listed in iterations.index")
                    iterations[position[i]][output["output"]] = _decode(name, data_i, failer(f"{spot}[{i}]"))
            accuracy[tuple(runners)] = iterations
        metrics[name] = accuracy
    return metrics
