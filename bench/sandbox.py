"""Latency of a trivial Python snippet: warm pool vs a cold container vs a bare local `python -c`.

    .venv/bin/python bench/sandbox.py [--n 100] [--cold-n 20]

All three are measured in one run on the same machine, end to end as a caller sees them: the pool
run includes sending the request and cleaning the work dir; the cold run includes creating, starting
and removing the hardened container (what `docker run --rm` does); the local run is
`subprocess.run([python3, "-c", snippet])` with the system python3 (the same Debian
3.11 the image has) when there is one. Prints p50/p99 and the ratios pool/local and cold/pool.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time

SNIPPET = "print(1 + 1)"


def _measure(fn, n: int, warmup: int = 2) -> list[float]:
    for _ in range(warmup):
        fn()
    out = []
    for _ in range(n):
        start = time.perf_counter()
        fn()
        out.append((time.perf_counter() - start) * 1000)
    return out


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q / 100 * (len(ordered) - 1))))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=100, help="runs for the pool and local cases")
    parser.add_argument("--cold-n", type=int, default=20, help="runs for the cold case (each starts a container)")
    args = parser.parse_args()
    if args.n < 2 or args.cold_n < 2:
        parser.error("--n and --cold-n must be at least 2")

    from rootstep.sandboxes import SandboxUnavailableError
    from rootstep.sandboxes._docker import DockerSandbox

    try:
        sandbox = DockerSandbox(pool=2)
        cold = DockerSandbox(pool=0)  # no pool: every run starts a container of its own
    except SandboxUnavailableError as exc:
        sys.exit(f"bench needs the Docker sandbox: {exc}")
    # a real interpreter, not a shim script (pyenv's `python3` is a bash script that costs ~150 ms)
    python = next((p for p in ("/usr/bin/python3", "/usr/local/bin/python3") if os.path.exists(p)), None)
    python = python or os.path.realpath(sys.executable)

    def pool_run() -> None:
        r = sandbox.run(code=SNIPPET)
        assert r.stdout == "2\n", r

    def cold_run() -> None:
        r = cold.run(code=SNIPPET)
        assert r.stdout == "2\n", r

    def local_run() -> None:
        r = subprocess.run([python, "-c", SNIPPET], capture_output=True, text=True)
        assert r.stdout == "2\n", r

    with sandbox, cold:
        sandbox.warm()
        results = {
            "warm pool": _measure(pool_run, args.n),
            "cold container": _measure(cold_run, args.cold_n, warmup=1),
            f"local {python} -c": _measure(local_run, args.n),
        }
    print(f"{'path':<32} {'n':>5} {'p50 ms':>9} {'p99 ms':>9} {'mean ms':>9}")
    for name, values in results.items():
        print(f"{name:<32} {len(values):>5} {_pct(values, 50):>9.1f} {_pct(values, 99):>9.1f} "
              f"{statistics.fmean(values):>9.1f}")
    pool, cold, local = (results[k] for k in results)
    print(f"pool / local  p50: {_pct(pool, 50) / _pct(local, 50):.2f}x   p99: {_pct(pool, 99) / _pct(local, 99):.2f}x")
    print(f"cold / pool   p50: {_pct(cold, 50) / _pct(pool, 50):.1f}x   p99: {_pct(cold, 99) / _pct(pool, 99):.1f}x")


if __name__ == "__main__":
    main()
