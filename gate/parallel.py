"""One check over several devices or CPU processes of one host: ``--devices all|0,1,...`` runs shard
``i/n`` of the golden set on the i-th device (its own process, ``CUDA_VISIBLE_DEVICES`` set to that
device alone), ``--jobs N`` runs ``N`` shards in ``N`` processes; the shards' partial result files
are then merged exactly as ``accuracy-gate merge`` merges a matrix's (``gate.merge``), so the verdict
and every number equal those of one unsharded run.

Processes are started with ``spawn`` (a fresh interpreter: CUDA and ONNX Runtime are initialised in
the child, after its ``CUDA_VISIBLE_DEVICES`` is set) and each writes its partial result file into a
temporary folder that is removed afterwards.
"""

from __future__ import annotations

import multiprocessing
import os
import tempfile
import traceback
from pathlib import Path

from gate.comparator.kernels_threads import DEFAULT_MAX_THREADS, THREADS_ENV, usable_cpus
from gate.errors import GateError

VISIBLE = "CUDA_VISIBLE_DEVICES"


def shard_compare_threads(jobs: int, cpus: int | None = None) -> int:
    """The compare threads of each of ``jobs`` CPU shard processes (``--jobs``), when
    ``ACCURACY_GATE_COMPARE_THREADS`` is not set: the usable CPUs shared out, at least 1, at most
    the kernel's default maximum (``gate.comparator.kernels_threads``), so that N processes do not
    each start the default pool on the same cores."""
    cpus = usable_cpus() if cpus is None else cpus
    return max(1, min(DEFAULT_MAX_THREADS, cpus // max(1, jobs)))


def visible_device_count() -> int:
    """How many CUDA devices this process sees (the CUDA driver API's count; 0 without a driver)."""
    import ctypes

    try:
        cuda = ctypes.CDLL("libcuda.so.1")
    except OSError:
        return 0
    count = ctypes.c_int()
    if cuda.cuInit(0) != 0 or cuda.cuDeviceGetCount(ctypes.byref(count)) != 0:
        return 0
    return count.value


def parse_devices(text: str, count: int | None = None, visible: str | None = None) -> list[str]:
    """``--devices`` -> the ``CUDA_VISIBLE_DEVICES`` value of each shard's process.

    ``all`` is every device this process sees (``count``, default :func:`visible_device_count`);
    ``0,1`` names devices by their index among those. Where this process runs under
    ``CUDA_VISIBLE_DEVICES`` itself (``visible``, default the environment's), index ``k`` is its
    ``k``-th entry, so that a child sees the same GPU the parent calls ``k``.

    Raises:
        GateError: no device visible for ``all``, an entry that is not a device index, an index
            given twice or beyond the visible devices.
    """
    visible = os.environ.get(VISIBLE) if visible is None else visible
    entries = [e.strip() for e in visible.split(",") if e.strip()] if visible else None
    raw = str(text).strip()
    if raw == "all":
        count = visible_device_count() if count is None else count
        if count < 1:
            raise GateError("--devices all: no CUDA device is visible (is the NVIDIA driver there?).")
        indices = list(range(count))
    else:
        parts = [p.strip() for p in raw.split(",")]
        if not parts or not all(p.isdigit() for p in parts):
            raise GateError(f"--devices must be 'all' or device indices such as 0,1, got {text!r}.")
        indices = [int(p) for p in parts]
        if len(set(indices)) != len(indices):
            raise GateError(f"--devices {raw}: a device is named twice.")
        limit = len(entries) if entries is not None else count
        if limit is not None and max(indices) >= limit:
            raise GateError(f"--devices {raw}: device {max(indices)} is not visible ({limit} visible).")
    return [entries[i] for i in indices] if entries is not None else [str(i) for i in indices]


def _shard_process(cfg, index: int, count: int, path: str, error_path: str) -> None:
    """A child: shard ``index/count`` of ``cfg``'s check, its partial result file written to ``path``;
    a GateError's one line (or an unexpected error's traceback) to ``error_path``."""
    from gate.job import check
    from gate.partial_file import write_partial
    from gate.shards import Shard

    try:
        result = check(cfg, Shard(index, count), partial=True)
        write_partial(result.run, path)
    except GateError as err:
        Path(error_path).write_text(str(err), encoding="utf-8")
    except BaseException:  # a bug, not a user mistake: keep the traceback for the parent's message
        Path(error_path).write_text(traceback.format_exc(), encoding="utf-8")
        raise


def _stored_iterations(cfg) -> int | None:
    """How many stored inputs ``cfg`` has, or None where they cannot be read (the shards then say why)."""
    from gate.data import open_tensor_set
    from gate.data.onnx_model import model_io

    try:
        input_names, _, _, types = model_io(cfg.model)
        return len(open_tensor_set(cfg.inputs, "input", input_names, None, types))
    except (GateError, OSError):
        return None


def check_parallel(cfg, devices: list[str] | None = None, jobs: int | None = None):
    """Runs ``cfg``'s check as ``n`` shards in ``n`` processes at once, one per entry of ``devices``
    (each with ``CUDA_VISIBLE_DEVICES`` set to it) or ``jobs`` of them on the CPU (at most one per
    stored iteration), and merges them (``gate.merge.merge_runs``).

    Returns:
        The merged ``gate.results.GateResult`` (``result.run`` is the merged run).

    Raises:
        GateError: neither or both of ``devices`` and ``jobs``; fewer than one process; a shard
            that could not be evaluated (its one line, naming the shard and device); a process
            that died without a result.
    """
    from gate.compared_run import result_of
    from gate.merge import merge_runs
    from gate.partial_file import read_partial

    if (devices is None) == (jobs is None):
        raise GateError("give either --devices or --jobs.")
    if devices is not None:
        cuda = getattr(cfg, "provider_options", {}).get("CUDAExecutionProvider", {})
        if cuda.get("device_id", "0") != "0":
            raise GateError(
                f"{cfg.path}: --devices gives each process one GPU, device 0 to it; CUDAExecutionProvider's "
                f"device_id is {cuda['device_id']}: leave it out or set it to 0."
            )
    count = len(devices) if devices is not None else int(jobs)
    if count < 1:
        raise GateError(f"--jobs must be at least 1, got {jobs}.")
    capped = ""
    total = _stored_iterations(cfg) if devices is None else None
    if total is not None and 0 < total < count:  # e.g. --jobs $(nproc) on a small golden set
        capped, count = f" (--jobs {count}, at most one per iteration)", total
    context = multiprocessing.get_context("spawn")
    with tempfile.TemporaryDirectory(prefix="accuracy-gate-shards-") as folder:
        processes = []
        saved = os.environ.get(VISIBLE)
        saved_threads = os.environ.get(THREADS_ENV)
        if saved_threads is None and devices is None:
            os.environ[THREADS_ENV] = str(shard_compare_threads(count))
        try:
            for index in range(1, count + 1):
                paths = (str(Path(folder) / f"partial-{index}.json"), str(Path(folder) / f"error-{index}.txt"))
                if devices is not None:
                    os.environ[VISIBLE] = devices[index - 1]  # the child inherits it when it starts
                process = context.Process(target=_shard_process, args=(cfg, index, count, *paths))
                process.start()
                processes.append((index, process, paths))
        finally:
            for name, value in ((VISIBLE, saved), (THREADS_ENV, saved_threads)):
                if value is None:
                    os.environ.pop(name, None)
                else:
                    os.environ[name] = value
        for _, process, _ in processes:
            process.join()
        runs = []
        for index, process, (path, error_path) in processes:
            where = f"shard {index}/{count}" + (f" on device {devices[index - 1]}" if devices is not None else "")
            if Path(error_path).is_file():
                lines = Path(error_path).read_text(encoding="utf-8").strip().splitlines() or ["no message"]
                raise GateError(f"{where}: {lines[-1]}")
            if process.exitcode != 0 or not Path(path).is_file():
                raise GateError(f"{where}: the process ended with exit code {process.exitcode} and no result.")
            runs.append((path, read_partial(path)))
        run = merge_runs(runs)
    stops = run.scope.partition("; ")[2]  # where --fail-fast stopped shards (gate.merge.merge_runs), or ""
    run.scope = f"{count} shard{'s' if count > 1 else ''} in parallel{capped}" + (
        f" on devices {','.join(devices)}" if devices is not None else ""
    )
    run.scope += f"; {stops}" if stops else ""
    return result_of(run)


def check_with(
    cfg,
    shard=None,
    partial: bool = False,
    devices: str | None = None,
    jobs: int | None = None,
    preview: str | None = None,
):
    """The check the flags ask for: ``gate.job.check`` (shard ``shard``), or shards in parallel
    processes (``devices``: ``--devices``' text, :func:`parse_devices`; ``jobs``: ``--jobs``), or a
    precision preview (``preview``: ``fp16`` / ``bf16``, ``gate.preview.check_preview``).

    Raises:
        GateError: flags that cannot go together (``--shard`` or ``--preview-precision`` with
            ``--devices`` / ``--jobs``); any error of the check itself.
    """
    parallel = devices is not None or jobs is not None
    if parallel and shard is not None:
        raise GateError("--shard cannot be combined with --devices or --jobs (they shard the run themselves).")
    if parallel and preview:
        raise GateError("--preview-precision runs in one process; leave out --devices and --jobs.")
    if preview:
        from gate.preview import check_preview

        return check_preview(cfg, preview, shard, partial=partial)
    if parallel:
        listed = parse_devices(devices) if devices is not None else None
        return check_parallel(cfg, listed, None if listed is not None else jobs)
    from gate.job import check

    return check(cfg, shard, partial=partial)
