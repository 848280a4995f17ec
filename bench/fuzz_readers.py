"""A time-bounded fuzz run over every reader of stored data and the config (outside CI).

    nice -n 19 python bench/fuzz_readers.py --seconds 1900 --seed 14 > fuzz.txt

Each iteration takes one reader's valid seed file, mutates it with ``tests/test_fuzz.py``'s strategy
(1-4 of truncate / flip a byte / insert bytes / splice), drawn here from a seeded ``random.Random``
instead of hypothesis so that a run of any length is one reproducible loop, and reads it. The only
allowed outcomes are a correct read or the project's one-line ``GateError``; anything else (another
exception, a multi-line message, a read slower than ``--hang`` seconds) is a failure, printed with the
reader, the iteration and the mutated bytes' file. It prints counts per reader: reads that succeeded,
one-line errors, failures. Exit 1 when any failure was found.
"""

from __future__ import annotations

import argparse
import io
import os
import random
import shutil
import signal
import sys
import tempfile
import time
import traceback
from collections import Counter, OrderedDict
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from gate.errors import GateError  # noqa: E402

CONFIG = (ROOT / "tests" / "test_fuzz.py").read_text().split('CONFIG = b"""', 1)[1].split('"""', 1)[0].encode()


class Hang(Exception):
    pass


def mutate(rng: random.Random, data: bytes) -> bytes:
    """tests/test_fuzz.py's ``mutations``, drawn from ``rng``."""
    data = bytearray(data)
    for _ in range(rng.randint(1, 4)):
        if not data:
            break
        kind = rng.choice(["truncate", "flip", "insert", "splice"])
        at = rng.randint(0, len(data) - 1)
        if kind == "truncate":
            del data[at:]
        elif kind == "flip":
            data[at] ^= rng.randint(1, 255)
        elif kind == "insert":
            data[at:at] = rng.randbytes(rng.randint(1, 8))
        else:
            data[at : at + rng.randint(1, 16)] = rng.randbytes(rng.randint(0, 16))
    return bytes(data)


def seeds(work: Path) -> dict:
    """reader name -> (list of valid seed files' bytes, file name, read(path))."""
    from onnx import numpy_helper

    from gate.comparator import serde
    from gate.comparator.struct import IterationResult, RunResults
    from gate.config import load_config
    from gate.data import open_tensor_set
    from gate.data.storage import TensorSet, read_tensor_proto

    arrays = {
        "f": np.linspace(-1, 1, 12, dtype=np.float32).reshape(3, 4),
        "i": np.arange(5, dtype=np.int64),
        "s": np.array(["ab", "ü"], dtype=object),
    }
    pb = [numpy_helper.from_array(a, name).SerializeToString() for name, a in arrays.items()]
    npz = []
    for save in (np.savez, np.savez_compressed):
        buffer = io.BytesIO()
        save(buffer, y=np.linspace(0, 1, 64, dtype=np.float32), ids=np.arange(3))
        npz.append(buffer.getvalue())
    run = RunResults([("r", [IterationResult(OrderedDict(y=np.arange(6, dtype=np.float32).reshape(2, 3)), 0.1, "r")])])
    js = [serde.to_json(run).encode(), serde.to_json([OrderedDict(x=np.ones(3, np.int32))]).encode()]

    def read_json(path):
        stored = open_tensor_set(path, "output")
        for index in range(len(stored)):
            stored[index]

    readers = {
        "tensor_proto": (pb, "output_0.pb", read_tensor_proto),
        "npz": (npz, "0.npz", lambda path: TensorSet(path.parent, "output")[0]),
        "polygraphy_json": (js, "golden.json", read_json),
        "config": ([CONFIG], "gate.toml", load_config),
    }
    readers.update(_report_seeds(work))
    return readers


def _report_seeds(work: Path) -> dict:
    """The partial result file, the results file (baseline and comment mode's untrusted reader), from
    one real run of the shipped example."""
    from gate.baseline import load_baseline
    from gate.config import load_config
    from gate.job import check
    from gate.partial_file import read_partial, write_partial
    from gate.results_file import read_untrusted_report, write_report
    from gate.shards import parse_shard

    example = ROOT / "examples" / "ppocr-cls"
    config = load_config(example / "gate.toml", {"root": str(example)})
    result = check(config, parse_shard("1/2"), partial=True)
    write_partial(result.run, work / "seed.partial.json")
    write_report(result, work / "seed.results.json", "0" * 40, "key")
    partial = (work / "seed.partial.json").read_bytes()
    report = (work / "seed.results.json").read_bytes()
    return {
        "partial_file": ([partial], "shard.partial.json", read_partial),
        "results_file_baseline": ([report], "results.json", lambda path: load_baseline([path])),
        "results_file_untrusted": ([report], "results.json", read_untrusted_report),
    }


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--seed", type=int, default=14)
    parser.add_argument("--hang", type=float, default=30.0, help="a read slower than this is a failure")
    parser.add_argument("--report-every", type=float, default=300.0)
    args = parser.parse_args(argv)
    rng = random.Random(args.seed)
    counts: dict[str, Counter] = {}
    failures = 0
    started = time.monotonic()

    def on_alarm(signum, frame):
        raise Hang()

    signal.signal(signal.SIGALRM, on_alarm)
    with tempfile.TemporaryDirectory(prefix="fuzz_readers_") as tmp:
        work = Path(tmp)
        readers = seeds(work)
        kept = Path(tempfile.mkdtemp(prefix="fuzz_failures_"))
        names = sorted(readers)
        print(f"fuzz_readers: seed {args.seed}, {args.seconds:.0f} s, readers {', '.join(names)}", flush=True)
        iteration, next_report = 0, started + args.report_every
        while time.monotonic() - started < args.seconds:
            iteration += 1
            name = names[iteration % len(names)]
            samples, file_name, read = readers[name]
            data = mutate(rng, rng.choice(samples))
            folder = work / f"case{iteration % 4}"
            if not folder.exists():  # what the config names, so that a config can be read to the end
                folder.mkdir()
                shutil.copy(ROOT / "examples" / "ppocr-cls" / "model.onnx", folder / "m.onnx")
                for name_ in ("data", "golden"):
                    shutil.copytree(ROOT / "examples" / "ppocr-cls" / "data", folder / name_)
            for old in folder.iterdir():
                if old.is_file() and old.name != "m.onnx":
                    old.unlink()
            path = folder / file_name
            path.write_bytes(data)
            count = counts.setdefault(name, Counter())
            signal.setitimer(signal.ITIMER_REAL, args.hang)
            try:
                read(path)
                outcome = "read"
            except GateError as err:
                outcome = "gate_error" if "\n" not in str(err) else "multi_line_error"
                problem = None if outcome == "gate_error" else str(err)
            except Hang:
                outcome, problem = "hang", f"no answer in {args.hang} s"
            except Exception as err:  # noqa: BLE001 - that is what we are looking for
                outcome, problem = "exception", traceback.format_exc(limit=4)
                del err
            finally:
                signal.setitimer(signal.ITIMER_REAL, 0)
            count[outcome] += 1
            if outcome not in ("read", "gate_error"):
                failures += 1
                saved = kept / f"{name}-{iteration}-{file_name}"
                saved.write_bytes(data)
                print(f"FAILURE {name} iteration {iteration} ({outcome}), bytes in {saved}:\n{problem}", flush=True)
            if time.monotonic() >= next_report:
                next_report += args.report_every
                print(f"[{time.monotonic() - started:.0f} s] {iteration} iterations, {failures} failures", flush=True)
        elapsed = time.monotonic() - started
        print(f"done: {iteration} iterations in {elapsed:.0f} s, {failures} failures")
        for name in names:
            count = counts.get(name, Counter())
            print(
                f"  {name:24s} total {sum(count.values()):7d}  read {count['read']:7d}  "
                f"gate_error {count['gate_error']:7d}  failures "
                f"{sum(v for k, v in count.items() if k not in ('read', 'gate_error'))}"
            )
        if not failures:
            os.rmdir(kept)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
