"""Fault injection (issue 14): ``accuracy-gate check`` and the action's entry point (``python
entrypoint.py`` with INPUT_* on examples/ppocr-cls) killed by SIGTERM or SIGKILL at random moments,
56 runs in all, 4 at a time. No report file may read passed for a run that did not pass; every file
left must parse (JUnit read back with junitparser, the results file with json).

Each run is one of: the CLI or the action; SIGTERM or SIGKILL; a golden set that passes or one that
regresses (an output moved by 0.01); the kill at a random moment from the start (fresh report paths:
a kill before the gate has even started leaves no file), or at a random moment after the run has
claimed its report files (over the files of an earlier passing run). Rules checked:

- regressing golden set: no file reads passed (not the earlier run's, not this one's);
- SIGTERM that the gate handled (exit 2): no file reads passed, and no traceback;
- an exit of 0 (the run finished before the signal): every file reads passed;
- the exit code is 0, 1 or 2, or the signal's (the process died before the handler was in place, or by SIGKILL).
"""

from __future__ import annotations

import random
import shutil
import signal
import subprocess
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import onnx
import pytest
from fault_runs import command, reads
from onnx import numpy_helper

from conftest import EXAMPLE

RUNS_PER_CASE = 7  # x 2 front ends x 2 signals x 2 golden sets = 56 runs
CLAIMED = "running: accuracy-gate has not finished"


@pytest.fixture(scope="module")
def workspaces(tmp_path_factory) -> dict:
    root = tmp_path_factory.mktemp("faults")
    spaces = {}
    for name in ("passes", "regresses"):
        space = Path(shutil.copytree(EXAMPLE, root / name))
        if name == "regresses":
            path = space / "data" / "test_data_set_5" / "output_0.pb"
            tensor = onnx.load_tensor(str(path))
            array = numpy_helper.to_array(tensor).copy()
            array.flat[0] += np.float32(0.01)
            onnx.save_tensor(numpy_helper.from_array(array, name=tensor.name), str(path))
        spaces[name] = space
    return spaces


def files_of(front: str) -> tuple[str, ...]:
    return ("j.xml", "m.md", "r.json") if front == "cli" else ("j.xml", "r.json")  # in the order claimed


def one_run(case: dict, spaces: dict, template: dict, duration: float) -> list[str]:
    """Runs ``case`` once; returns the rules it broke (one line each); ``case["exit"]`` gets the exit code."""
    space = spaces[case["golden"]]
    out = space / f"out-{case['id']}"
    out.mkdir()
    names = files_of(case["front"])
    if case["when"] == "after-claim":
        for name in names:
            shutil.copy(template[case["front"]] / name, out / name)
    args, env = command(case["front"], space, out)
    rng = random.Random(case["seed"])
    proc = subprocess.Popen(
        list(map(str, args)), cwd=space, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    started = time.monotonic()
    if case["when"] == "after-claim":
        last = out / names[-1]  # claimed last (the claims of several files are one rename each, in turn)
        while proc.poll() is None and CLAIMED not in (last.read_text("utf-8") if last.exists() else ""):
            time.sleep(0.002)
        time.sleep(rng.uniform(0, max(0.05, duration - (time.monotonic() - started))))
    else:
        time.sleep(rng.uniform(0, duration))
    if proc.poll() is None:
        proc.send_signal(case["signal"])
    stdout, stderr = proc.communicate(timeout=120)
    code = case["exit"] = proc.returncode
    states = {name: reads(out / name) for name in names if (out / name).exists()}
    where = f"{case} exit {code} files {states}"
    broken = [f"{name} is {state}: {where}" for name, state in states.items() if state.startswith("unreadable")]
    if code not in (0, 1, 2, -signal.SIGTERM, -signal.SIGKILL):
        broken.append(f"exit code: {where}\n{stderr[-2000:]}")
    if case["golden"] == "regresses" or code == 2:
        broken += [f"{name} reads passed: {where}" for name, state in states.items() if state == "passed"]
    if code == 2 and case["signal"] == signal.SIGTERM and "Traceback" in stdout + stderr:
        broken.append(f"traceback: {where}\n{stderr[-2000:]}")
    if code == 0 and (set(states.values()) != {"passed"} or len(states) != len(names)):
        broken.append(f"a finished run's files do not all read passed: {where}")
    return broken


def test_killed_runs_never_leave_a_report_that_reads_passed(workspaces):
    template, duration = {}, {}
    for front in ("cli", "action"):  # one complete passing run per front end: the earlier green files
        out = workspaces["passes"] / f"template-{front}"
        out.mkdir()
        args, env = command(front, workspaces["passes"], out)
        started = time.monotonic()
        proc = subprocess.run(list(map(str, args)), cwd=workspaces["passes"], env=env, capture_output=True, text=True)
        duration[front] = time.monotonic() - started
        assert proc.returncode == 0, proc.stdout + proc.stderr
        assert {reads(out / name) for name in files_of(front)} == {"passed"}
        template[front] = out
    rng = random.Random(14)
    cases = [
        {
            "id": f"{front}-{sig.name}-{golden}-{i}",
            "front": front,
            "signal": sig,
            "golden": golden,
            "when": rng.choice(["from-start", "after-claim"]),
            "seed": rng.randrange(2**32),
        }
        for front in ("cli", "action")
        for sig in (signal.SIGTERM, signal.SIGKILL)
        for golden in ("passes", "regresses")
        for i in range(RUNS_PER_CASE)
    ]
    with ThreadPoolExecutor(4) as pool:
        results = list(pool.map(lambda case: one_run(case, workspaces, template, duration[case["front"]]), cases))
    broken = [line for result in results for line in result]
    seen = Counter((case["front"], case["signal"].name, case["when"], case["exit"]) for case in cases)
    print("runs by front end, signal, kill moment, exit code:", dict(sorted(seen.items())))  # pytest -s
    assert len(cases) >= 50
    assert not broken, "\n".join(broken[:10])
