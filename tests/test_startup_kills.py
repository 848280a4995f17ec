"""Kills in the start-up window: an earlier run's PASSING report set (marked, so that it is told from
this run's files) lies at the report paths; ``accuracy-gate check`` and the action's entry point are
started over it and SIGKILLed at random early moments (half of them 0-50 ms after the start, the rest
up to the length of a whole run). Rule: after a kill, a file of the earlier set that still reads
passed is allowed only when the process had not yet imported numpy (its ``PYTHONPROFILEIMPORTTIME``
lines on stderr show how far it got): the gate claims its report paths before the heavy imports
(``gate.early_claim``), so only a kill during the interpreter's start-up and the first light imports
can leave one. A file that reads passed and is not the earlier set's must come from a run that
passed (the golden set passes). Every file left must parse. Runs two at a time (CI has 2 cores).
"""

from __future__ import annotations

import random
import re
import shutil
import signal
import subprocess
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from fault_runs import command, reads

from conftest import EXAMPLE

RUNS = 12  # per front end
EARLIER = "earlier-run"  # the mark of the earlier run's files
NUMPY = re.compile(r"^import time:\s+\d+ \|\s+\d+ \| +numpy$", re.M)  # numpy's import finished


def mark(path: Path) -> None:
    """The earlier run's file, still passing, with the mark added (the first bytes unchanged)."""
    text = path.read_text("utf-8")
    if path.suffix == ".xml":
        text += f"<!-- {EARLIER} -->\n"
    elif path.suffix == ".json":
        text = text.rstrip().removesuffix("}") + f', "{EARLIER}": true}}\n'
    else:
        text += f"\n{EARLIER}\n"
    path.write_text(text, "utf-8")


FILES = {"cli": ("j.xml", "m.md", "r.json", "p.json"), "action": ("j.xml", "r.json")}


def one_run(case: dict, space: Path, earlier: dict) -> list[str]:
    out = space / f"out-{case['id']}"
    out.mkdir()
    names = FILES[case["front"]]
    for name in names:
        shutil.copy(earlier[case["front"]] / name, out / name)
    args, env = command(case["front"], space, out, partial=True)
    env["PYTHONPROFILEIMPORTTIME"] = "1"
    proc = subprocess.Popen(list(map(str, args)), cwd=space, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    time.sleep(case["delay"])
    proc.kill()
    _, stderr = proc.communicate(timeout=60)
    case["exit"] = proc.returncode
    numpy = bool(NUMPY.search(stderr.decode("utf-8", "replace")))
    states = {name: reads(out / name) for name in names if (out / name).exists()}
    earlier_left = [name for name in states if EARLIER in (out / name).read_text("utf-8", "replace")]
    case["earlier_left"] = bool(earlier_left)
    where = f"{case['front']} killed {case['delay'] * 1000:.1f} ms after the start, exit {proc.returncode}, {states}"
    broken = [f"{name} is {state}: {where}" for name, state in states.items() if state.startswith("unreadable")]
    broken += [
        f"{name}: the earlier run's file reads passed after numpy was imported: {where}"
        for name in earlier_left
        if numpy and states[name] == "passed"
    ]
    if proc.returncode == 0 and (set(states.values()) != {"passed"} or earlier_left):
        broken.append(f"a finished run's files are not all its own and passed: {where}")
    return broken


def test_killed_in_the_start_up_window_no_earlier_passing_report_is_left(tmp_path):
    space = Path(shutil.copytree(EXAMPLE, tmp_path / "ws"))
    earlier, duration = {}, {}
    for front in FILES:  # one complete passing run per front end: the earlier run's files, marked
        out = space / f"earlier-{front}"
        out.mkdir()
        args, env = command(front, space, out, partial=True)
        started = time.monotonic()
        proc = subprocess.run(list(map(str, args)), cwd=space, env=env, capture_output=True, text=True)
        duration[front] = time.monotonic() - started
        assert proc.returncode == 0, proc.stdout + proc.stderr
        assert {reads(out / name) for name in FILES[front]} == {"passed"}
        for name in FILES[front]:
            mark(out / name)
            assert reads(out / name) == "passed"
        earlier[front] = out
    rng = random.Random(15)
    cases = [
        {
            "id": f"{front}-{i}",
            "front": front,
            "delay": rng.uniform(0, 0.05) if i % 2 else rng.uniform(0.05, duration[front]),
        }
        for front in FILES
        for i in range(RUNS)
    ]
    with ThreadPoolExecutor(2) as pool:
        results = list(pool.map(lambda case: one_run(case, space, earlier), cases))
    broken = [line for result in results for line in result]
    seen = Counter((case["front"], case["exit"], case["earlier_left"]) for case in cases)
    print("runs by front end, exit code, an earlier file left:", dict(sorted(seen.items())))  # pytest -s
    assert any(case["delay"] < 0.05 for case in cases) and all(case["exit"] in (0, -signal.SIGKILL) for case in cases)
    assert not broken, "\n".join(broken[:10])
