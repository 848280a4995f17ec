"""Peak RSS of ``check`` does not grow with the number of iterations: inputs and golden outputs are
streamed from disk one iteration at a time and only per-output statistics are kept."""

from __future__ import annotations

import subprocess
import sys

import numpy as np

from conftest import ROOT, make_small_model, write_gate_toml

SIZE = 256  # x: [64, 256] float32 = 64 KiB per tensor; 400 iterations of inputs + golden = 75 MiB if kept


def make_golden_set(folder, iterations):
    make_small_model(folder / "m.onnx", size=SIZE)
    inputs = folder / "inputs"
    inputs.mkdir()
    rng = np.random.default_rng(0)
    for i in range(iterations):
        np.savez(inputs / f"{i:04d}.npz", x=rng.standard_normal((64, SIZE)).astype(np.float32))
    cfg = write_gate_toml(folder, 'model = "m.onnx"\ninputs = "inputs"\ngolden = "golden"\n')
    subprocess.run([sys.executable, "-m", "gate", "record", str(cfg)], check=True, capture_output=True, cwd=ROOT)
    return cfg


def peak_rss_kib(cfg, junit) -> int:
    code = (
        "import resource, sys; from gate.cli import main; "
        f"rc = main(['check', {str(cfg)!r}, '--junit', {str(junit)!r}]); "
        "print('RSS', resource.getrusage(resource.RUSAGE_SELF).ru_maxrss); sys.exit(rc)"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=600)
    assert proc.returncode == 0, proc.stderr
    return int(proc.stdout.strip().splitlines()[-1].split()[1])


def test_peak_rss_flat_from_20_to_400_iterations(tmp_path):
    small, large = tmp_path / "n20", tmp_path / "n400"
    small.mkdir()
    large.mkdir()
    rss_small = peak_rss_kib(make_golden_set(small, 20), small / "j.xml")
    rss_large = peak_rss_kib(make_golden_set(large, 400), large / "j.xml")
    growth_mib = (rss_large - rss_small) / 1024
    print(f"peak RSS: 20 iterations {rss_small / 1024:.1f} MiB, 400 iterations {rss_large / 1024:.1f} MiB")
    assert growth_mib < 20, f"peak RSS grew by {growth_mib:.1f} MiB from 20 to 400 iterations"
