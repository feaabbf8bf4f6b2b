"""Smoke test of the lookup benchmark: it runs in every allocation regime and reports sane rows.

In a subprocess, since the regimes change how the process allocates (glibc ``mallopt``)."""
import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("regime", ["fresh", "reuse", "default"])
def test_bench_lookup_small_run(regime, tmp_path):
    out = tmp_path / "results.json"
    proc = subprocess.run([sys.executable, str(REPO / "benchmarks" / "bench_lookup.py"), "--shapes", "arxiv",
                           "--ranks", "4", "--batches", "2000", "--methods", "kernel", "reference", "dense",
                           "--budget", "0.05", "--max-repeats", "3", "--malloc", regime, "--threads", "1",
                           "--json", str(out)], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    results = json.loads(out.read_text())
    assert [r["method"] for r in results] == ["kernel", "reference", "dense"]
    assert all(r["batch"] == 2000 and 0 < r["unique"] <= 2000 for r in results)
    assert all(r["forward_ms"] > 0 and r["fwd_bwd_ms"] > 0 for r in results)
    assert f"malloc {regime}" in proc.stdout and "| arxiv | 4 | 2,000 |" in proc.stdout
