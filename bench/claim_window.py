"""How long an earlier run's passing report files stay at the report paths after the gate starts: the
start-up window in which a killed run would leave them (README, "Claimed early").

For ``accuracy-gate check`` and the action's ``entrypoint.py`` on examples/ppocr-cls, with an earlier
passing report set at the report paths, the time from starting the process to the first and the last
report file claimed (their bytes changed; polled every 0.5 ms) and to its exit, against the floor:
the interpreter starting and exiting (``python -c pass``). Medians of ``--runs`` runs, interleaved
(floor, CLI, action, floor, ...). ``--checkout PATH`` measures another checkout's ``gate`` (say, main's)
in the same table.

    python bench/claim_window.py [--runs 9] [--checkout /path/to/other/checkout]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FILES = {"cli": ("j.xml", "m.md", "r.json"), "action": ("j.xml", "r.json")}


def command(checkout: Path, front: str, space: Path, out: Path) -> tuple[list, dict]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GITHUB_", "INPUT_"))}
    env["PYTHONPATH"] = str(checkout)
    if front == "floor":
        return [sys.executable, "-c", "pass"], env
    if front == "cli":
        flags = ["--junit", out / "j.xml", "--markdown", out / "m.md", "--report", out / "r.json", "--root", space]
        return [sys.executable, "-m", "gate", "check", space / "gate.toml", *flags], env
    rel = out.relative_to(space)
    env.update(
        GITHUB_WORKSPACE=str(space),
        GITHUB_OUTPUT=str(out) + ".output",
        GITHUB_STEP_SUMMARY=str(out) + ".summary",
        INPUT_CONFIG="gate.toml",
        INPUT_COMMENT_MODE="off",
        INPUT_JUNIT_PATH=f"{rel}/j.xml",
        INPUT_REPORT_PATH=f"{rel}/r.json",
    )
    return [sys.executable, checkout / "entrypoint.py"], env


def timed(args, env, space: Path, out: Path, names) -> tuple[float, float, float]:
    """(first claim, last claim, exit) in seconds after the start."""
    old = {name: (out / name).read_bytes() for name in names}
    started = time.monotonic()
    proc = subprocess.Popen(list(map(str, args)), cwd=space, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    seen: dict = {}
    while len(seen) < len(names) and proc.poll() is None:
        for name in names:
            if name not in seen and (out / name).read_bytes() != old[name]:
                seen[name] = time.monotonic() - started
        time.sleep(0.0005)
    stderr = proc.communicate()[1]
    end = time.monotonic() - started
    if proc.returncode != 0:
        sys.exit(f"{args[-1]}: exit {proc.returncode}\n{stderr.decode(errors='replace')[-2000:]}")
    return min(seen.values(), default=end), max(seen.values(), default=end), end


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=9)
    parser.add_argument("--checkout", type=Path, action="append", default=[], help="another checkout to measure")
    args = parser.parse_args(argv)
    checkouts = [ROOT, *[path.resolve() for path in args.checkout]]
    with tempfile.TemporaryDirectory(prefix="claim-window-") as scratch:
        space = Path(shutil.copytree(ROOT / "examples" / "ppocr-cls", Path(scratch) / "ws"))
        earlier = {}
        for front in FILES:  # the earlier passing run's files
            out = space / f"earlier-{front}"
            out.mkdir()
            cmd, env = command(ROOT, front, space, out)
            subprocess.run(list(map(str, cmd)), cwd=space, env=env, capture_output=True, check=True)
            earlier[front] = out
        times: dict = {}
        for run in range(args.runs):
            for n, checkout in enumerate(checkouts):
                for front in ("floor", *FILES):
                    names = FILES.get(front, ())
                    out = space / f"out-{n}-{front}-{run}"
                    out.mkdir()
                    for name in names:
                        shutil.copy(earlier[front] / name, out / name)
                    cmd, env = command(checkout, front, space, out)
                    times.setdefault((n, front), []).append(timed(cmd, env, space, out, names))
    floor = statistics.median(end for _, _, end in times[0, "floor"]) * 1000
    print(f"median of {args.runs} runs; floor (python -c pass, start to exit): {floor:.1f} ms")
    heads = ("first ms", "last ms", "last-first", "exit ms", "first/floor")
    print(f"{'checkout':<40} {'front':<7} " + " ".join(f"{head:>11}" for head in heads))
    for (n, front), values in sorted(times.items()):
        if front == "floor":
            continue
        first, last, end = (statistics.median(v[i] for v in values) * 1000 for i in range(3))
        spread = statistics.median((v[1] - v[0]) * 1000 for v in values)
        name = str(checkouts[n])[-40:]
        print(f"{name:<40} {front:<7} {first:11.1f} {last:11.1f} {spread:11.2f} {end:11.1f} {first / floor:11.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
