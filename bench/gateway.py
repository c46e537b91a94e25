"""What the gateway adds to an LLM call, and how fast it serves a replay.

    .venv/bin/python bench/gateway.py [--n 400] [--local]

Measured in one run, on one machine, against the scripted provider (no model, no network, zero
simulated latency, so every millisecond shown is overhead):
  * direct:  `litellm.acompletion("scripted/bench", ...)` awaited in this process: litellm alone;
  * gateway: the same call as an HTTP POST to `/run/<run>/agent/<agent>/v1/chat/completions` from a
    keep-alive httpx client to a gateway in its own process (as `rootstep gateway serve` runs it),
    journal fsync'd per call (the default) and, for comparison, with fsync off;
  * openai:  the same through the real `openai` client (what a framework sees; adds the client's cost);
  * replay:  the recorded run served back (`mode="replay"`, zero live calls), sequentially and with 8
    concurrent clients: calls per second.
Each gateway call is paired with a direct call made just before it: this machine is shared, and load
swings between two back-to-back measurements are larger than the 1-2 ms being measured.
Added latency = gateway percentile minus direct percentile. Target: under 2 ms at p50.
With `--local`, also the offline agents' model (`local/qwen2.5-coder-0.5b`) through the gateway: load time
and tokens per second (bench/local_model.py measures it in depth).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import socket
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q / 100 * (len(ordered) - 1))))]


def body(i: int) -> dict:
    return {"model": "bench", "messages": [{"role": "system", "content": "You are a benchmark."},
                                            {"role": "user", "content": f"question {i}: what is {i}*7?"}]}


def serve(port: int, journal: str, fsync: bool) -> None:
    """The gateway process: the `bench` script registered, one record run, admin routes for the rest."""
    import uvicorn

    from rootstep.gateway import Gateway, RunContext, create_app, register_script

    register_script("bench", lambda messages, params: "42")
    gateway = Gateway(journal, fsync=fsync)
    gateway.register(RunContext(run_id="rec", model="scripted/bench"))
    uvicorn.run(create_app(gateway), host="127.0.0.1", port=port, log_level="warning", access_log=False)


class GatewayProcess:
    def __init__(self, journal: Path, fsync: bool):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self.proc = subprocess.Popen(
            [sys.executable, __file__, "--serve", str(self.port), "--journal", str(journal), "--fsync", str(int(fsync))]
        )

    def __enter__(self) -> "GatewayProcess":
        import httpx

        deadline = time.monotonic() + 60
        while True:
            try:
                httpx.get(self.url + "/health", timeout=1).raise_for_status()
                return self
            except httpx.HTTPError:
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError("the gateway process did not start") from None
                time.sleep(0.1)

    def __exit__(self, *exc: object) -> None:
        self.proc.terminate()
        self.proc.wait(timeout=10)


def measure_paired(loop: asyncio.AbstractEventLoop, gateway_call, n: int, offset: int) -> tuple[list[float], list[float]]:
    import litellm

    direct, gateway = [], []
    for i in range(-20, n):  # 20 warm-up pairs
        messages = body(offset + i)["messages"]
        start = time.perf_counter()
        loop.run_until_complete(litellm.acompletion(model="scripted/bench", messages=messages, _skip_mcp_handler=True))
        mid = time.perf_counter()
        gateway_call(offset + i)
        end = time.perf_counter()
        if i >= 0:
            direct.append((mid - start) * 1000)
            gateway.append((end - mid) * 1000)
    return direct, gateway


def replay_rate(url: str, indices: list[int], workers: int) -> float:
    import httpx

    def one(chunk: list[int]) -> None:
        with httpx.Client(timeout=30) as http:
            for i in chunk:
                http.post(url, json=body(i)).raise_for_status()

    chunks = [indices[w::workers] for w in range(workers)]
    start = time.perf_counter()
    with ThreadPoolExecutor(workers) as pool:
        list(pool.map(one, chunks))
    return len(indices) / (time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=400, help="calls per measurement")
    parser.add_argument("--local", action="store_true", help="also measure the offline default model")
    parser.add_argument("--serve", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--journal", help=argparse.SUPPRESS)
    parser.add_argument("--fsync", type=int, default=1, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        return serve(args.serve, args.journal, bool(args.fsync))
    n = args.n

    import httpx
    from openai import OpenAI

    from rootstep.gateway import register_script

    register_script("bench", lambda messages, params: "42")
    loop = asyncio.new_event_loop()  # one loop for every direct call: litellm's logging worker binds to it
    root = Path(tempfile.mkdtemp(prefix="rootstep-bench-gateway-"))
    rows: dict[str, tuple[list[float], list[float]]] = {}
    for label, fsync in (("gateway (fsync)", True), ("gateway (no fsync)", False)):
        with GatewayProcess(root / f"journal-{int(fsync)}", fsync) as gw, httpx.Client(timeout=30) as http:
            base = f"{gw.url}/run/rec/agent/solver/v1"
            rows[label] = measure_paired(loop, lambda i: http.post(base + "/chat/completions", json=body(i)).raise_for_status(), n, 0)
            if not fsync:
                continue
            client = OpenAI(base_url=base, api_key="unused", max_retries=0)
            rows["openai client -> gateway"] = measure_paired(loop, lambda i: client.chat.completions.create(**body(i)), n, 10_000)
            for run_id in ("rep-seq", "rep-par"):
                http.post(f"{gw.url}/admin/runs", json={"run_id": run_id, "mode": "replay", "replay_of": "rec",
                                                         "model": "scripted/bench"}).raise_for_status()
            indices = list(range(-20, n))
            seq = replay_rate(f"{gw.url}/run/rep-seq/agent/solver/v1/chat/completions", indices, 1)
            par = replay_rate(f"{gw.url}/run/rep-par/agent/solver/v1/chat/completions", indices, 8)
            stats_seq = http.get(f"{gw.url}/admin/runs/rep-seq").json()
            stats_par = http.get(f"{gw.url}/admin/runs/rep-par").json()

    print(f"gateway overhead: {n} calls each, scripted provider with zero latency, gateway in its own process;")
    print("each gateway call paired with a direct litellm call made just before it (ms per call)")
    print(f"{'path':26} {'p50':>7} {'p99':>7}   {'direct p50':>10} {'direct p99':>10}   added p50   added p99")
    for label, (direct, values) in rows.items():
        print(f"{label:26} {pct(values, 50):7.3f} {pct(values, 99):7.3f}   {pct(direct, 50):10.3f} {pct(direct, 99):10.3f}"
              f"   {pct(values, 50) - pct(direct, 50):9.3f}   {pct(values, 99) - pct(direct, 99):9.3f}")
    print(f"replay served {len(indices)} recorded calls: {seq:,.0f} calls/s sequential (live {stats_seq['live']}, "
          f"replayed {stats_seq['replayed']}), {par:,.0f} calls/s with 8 clients "
          f"(live {stats_par['live']}, replayed {stats_par['replayed']})")
    direct, values = rows["gateway (fsync)"]
    added = pct(values, 50) - pct(direct, 50)
    print(f"added p50 with fsync'd journal: {added:.3f} ms -> {'within' if added < 2 else 'OVER'} the 2 ms target")
    if args.local:
        measure_local(root)


def measure_local(root: Path) -> None:
    from openai import OpenAI

    from rootstep.gateway import DEFAULT_MODEL, Gateway, GatewayServer, RunContext
    from rootstep.gateway._local_model import engine

    start = time.perf_counter()
    engine(DEFAULT_MODEL.split("/", 1)[1])
    load = time.perf_counter() - start
    gateway = Gateway(root / "journal-local")
    gateway.register(RunContext(run_id="local"))
    questions = ["What is the capital of France?", "Name three colours.", "What does a compiler do?",
                 "Write one sentence about the sea."]
    with GatewayServer(gateway) as server:
        client = OpenAI(base_url=server.base_url("local", "solver"), api_key="unused", max_retries=0, timeout=600)
        replies, seconds = [], []
        for q in questions:
            start = time.perf_counter()
            replies.append(client.chat.completions.create(model="m", messages=[{"role": "user", "content": q}],
                                                          max_tokens=64, temperature=0))
            seconds.append(time.perf_counter() - start)
    wall = sum(seconds)
    prompt = sum(r.usage.prompt_tokens for r in replies)
    completion = sum(r.usage.completion_tokens for r in replies)
    per_call = ", ".join(f"{r.usage.completion_tokens} tok in {t:.2f} s" for r, t in zip(replies, seconds))
    print(f"{DEFAULT_MODEL} (threads {os.environ.get('ROOTSTEP_LOCAL_THREADS', 'default')}): load {load:.1f} s; "
          f"{len(replies)} calls, {prompt} prompt + {completion} completion tokens in {wall:.1f} s = "
          f"{completion / wall:.1f} generated tokens/s end to end ({per_call})")
    print(f"  e.g. {questions[0]!r} -> {replies[0].choices[0].message.content!r}")
    gateway.close()


if __name__ == "__main__":
    main()
