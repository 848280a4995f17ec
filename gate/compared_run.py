"""What one ``check`` (or a merge of shards) compared, ``ComparedRun``, its fingerprints (the settings
and golden set it was compared under) and its verdict (``result_of``): the run model a partial
result file stores (``gate.partial_file``) and ``gate.merge`` combines."""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass, field
from pathlib import Path

from gate.backend.gpu_facts import precision_note
from gate.comparator.struct import AccuracyResult
from gate.compare_funcs import compare_settings, func_rows, judge_rows
from gate.paths import open_regular
from gate.per_output import value_for_output
from gate.results import ERROR, GateResult, finish_rows, gate_result, mark_stopping_output, verdicts
from gate.shards import Shard


def _canonical(data) -> str:
    return json.dumps(data, sort_keys=True, separators=(",", ":"), allow_nan=False)


def _tolerance(value):
    if isinstance(value, dict):
        return {str(k): float(v) for k, v in value.items()}
    return float(value)


def config_settings(cfg, model_sha256: str) -> dict:
    """Every setting of ``cfg`` (a ``gate.config.GateConfig``) that can change a number or a verdict:
    the model (file name and sha256), runners, ONNX Runtime and TensorRT settings, tolerances,
    statistics, check_average, infinities_compare_equal and validate. Not paths, the JUnit path, the
    title or the engine cache folder."""
    trt = {k: v for k, v in sorted(cfg.trt.items()) if k not in ("cache_dir", "engine")}
    engine = cfg.trt.get("engine")
    if engine:
        trt["engine_sha256"] = _file_sha256(Path(engine))
    stat = cfg.check_error_stat
    extra = {}  # settings added later, kept out of the fingerprint at their defaults (files stay comparable)
    if getattr(cfg, "error_quantile", 0.99) != 0.99:
        extra["error_quantile"] = _tolerance(cfg.error_quantile)
    if getattr(cfg, "fail_fast", False):
        extra["fail_fast"] = True
    return {
        "model": cfg.model.name,
        "model_sha256": model_sha256,
        "runners": list(cfg.runners),
        "execution_providers": list(cfg.execution_providers),
        "graph_optimization_level": cfg.graph_optimization_level,
        "atol": _tolerance(cfg.atol),
        "rtol": _tolerance(cfg.rtol),
        "check_error_stat": dict(stat) if isinstance(stat, dict) else stat,
        "check_average": bool(cfg.check_average),
        "infinities_compare_equal": bool(cfg.infinities_compare_equal),
        **({"nan_compare_equal": True} if getattr(cfg, "nan_compare_equal", False) else {}),
        "validate": bool(cfg.validate),
        "trt": json.loads(_canonical(trt)),
        **extra,
        **({"provider_options": dict(cfg.provider_options)} if getattr(cfg, "provider_options", None) else {}),
        **json.loads(_canonical(compare_settings(cfg))),  # only where not the defaults
    }


def settings_sha256(settings: dict) -> str:
    return hashlib.sha256(_canonical(settings).encode("utf-8")).hexdigest()


def _file_sha256(path: Path) -> str | None:
    try:
        digest = hashlib.sha256()
        with open_regular(path) as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                digest.update(block)
        return digest.hexdigest()
    except OSError:
        return None


def golden_fingerprint(golden) -> dict:
    """``{"iterations": n, "files_sha256": hex}`` of a golden tensor set: the count and a sha256 over
    the name and size of every file that holds an iteration (a model-zoo folder's files, an npz or
    JSON file), in iteration order. Cheap (no file is read), so every shard computes it for the whole
    set; contents are hashed per iteration while streaming (:class:`DigestingView`)."""
    digest = hashlib.sha256()
    seen = set()
    for index in range(len(golden)):
        location = Path(golden.location(index))
        if location in seen:  # one Polygraphy JSON file holds every iteration
            continue
        seen.add(location)
        if location.is_dir():
            files = sorted(p for p in location.rglob("*") if p.is_file())
            entries = [(f"{location.name}/{p.relative_to(location).as_posix()}", p.stat().st_size) for p in files]
        else:
            entries = [(location.name, location.stat().st_size if location.exists() else -1)]
        for name, size in entries:
            digest.update(f"{index}\0{name}\0{size}\n".encode())
    return {"iterations": len(golden), "files_sha256": digest.hexdigest()}


@dataclass
class ComparedRun:
    """What one ``check`` (or a merge of shards) compared: the comparator's ``accuracy`` with its
    iterations in ascending golden-set order, ``indices[j]`` being the golden-set index of position
    ``j``; the fingerprints of the config and the golden set; and what the verdict needs besides."""

    model: str
    title: str
    settings: dict
    golden: dict
    shard: Shard
    indices: list[int]
    accuracy: AccuracyResult
    golden_sha256: list = field(default_factory=list)
    where: dict = field(default_factory=dict)
    stopped: dict | None = None
    fail_fast_stop: int | None = None  # --fail-fast: the golden-set index whose judging failure stopped the run
    duration_s: float = 0.0
    facts: dict = field(default_factory=dict)
    commit: str | None = None
    scope: str = ""
    metrics: dict = field(default_factory=dict)  # compare function name -> AccuracyResult (besides simple)
    config_path: str = ""  # the gate.toml, as given (the JUnit file's 'file'); not part of the digest

    @property
    def total(self) -> int:
        return int(self.golden["iterations"])

    @property
    def config_sha256(self) -> str:
        return settings_sha256(self.settings)

    @property
    def complete(self) -> bool:
        """Every iteration of the shard was compared."""
        return self.stopped is None and self.indices == list(self.shard.indices(self.total))

    def content_sha256(self) -> str | None:
        """sha256 over the per-iteration golden digests of a complete 1/1 run (an unsharded check,
        or a merge of every shard): equal for the same golden contents however the run was split."""
        if self.shard.count != 1 or not self.complete or None in self.golden_sha256:
            return None
        return hashlib.sha256("\n".join(self.golden_sha256).encode()).hexdigest()


def result_of(run: ComparedRun, where=None) -> GateResult:
    """The verdict and report rows of ``run``: ``gate.results.verdicts`` over its AccuracyResult, the
    gate's own row checks, and the verdict; ``check`` and ``merge`` both go through here, so the same
    comparisons give the same numbers, messages and exit code. ``where(index) -> str | None`` names
    the files of an iteration for error messages (default: those recorded in ``run.where``).

    Raises:
        GateError: ``check_average`` over an output that could not be compared.
    """
    rows = verdicts(run.accuracy, run.indices)
    for name, accuracy in run.metrics.items():
        rows += func_rows(name, accuracy, run.indices, run.settings)
    order = {key: n for n, key in reversed(list(enumerate((row.pair, row.output) for row in rows)))}
    rows.sort(key=lambda row: order[(row.pair, row.output)])  # an output's functions together, simple first
    judge_rows(rows, run.settings)
    for row in rows:  # which quantile a "quantile" row checked, for every report and the results file
        if row.stat == "quantile" and row.func == "simple":
            row.quantile = float(value_for_output(run.settings.get("error_quantile", 0.99), row.output, 0.99))
    if run.settings.get("fail_fast") or run.fail_fast_stop is not None:  # the first failing judging comparison
        # stopped the run: it regressed, whatever max_failed_iterations allows
        for row in rows:
            if row.verdict and row.func != "task" and not row.averaged and not row.error and row.failed_iterations:
                row.allowed_failures, row.passed = 0, False
    finish_rows(rows, where or run.where.get)
    result = gate_result(run.model, run.title, rows, len(run.indices), run.duration_s, dict(run.facts))
    if note := precision_note(result.facts, rows):  # e.g. TF32 on the GPU behind a float failure
        result.facts["note"] = note
    if run.stopped is not None:
        result.status = ERROR
        result.stopped_at = run.stopped.get("iteration")
        result.message = run.stopped["message"]
        mark_stopping_output(result, run.stopped)
    result.scope = run.scope
    result.config_path = run.config_path
    result.run = run
    return result


def env_commit(environ=os.environ) -> str | None:
    """The commit a run is for, as GitHub Actions gives it (``GITHUB_SHA``); None elsewhere."""
    sha = environ.get("GITHUB_SHA", "")
    return sha if len(sha) in (40, 64) and all(c in "0123456789abcdef" for c in sha) else None
