"""What the serve scenario's client costs: its closed loop against a bare aiohttp closed loop,
both against an instant local stub, so that the server is never what is measured.

The stub (this script with --stub, in a process of its own) answers every streamed completion
at once: `new_tokens` text chunks, a usage chunk and [DONE], as vLLM streams them, and counts
the connections each client opened. accelbench's rate is the steady requests per second of the
serve scenario's closed loop (`--batch-size` requests in flight, the scenario's own
measurement, in this process); the bare loop is the least a client of the protocol can do: as
many aiohttp tasks, each posting the same body and reading its event stream to its end, each
chunk's JSON read for its text and timed as vllm bench does, over as many requests after one
warm-up epoch. Each round gives a paired
ratio, accelbench / bare (1.00: the client costs nothing), and the connections each opened (one
per request in flight: connections reused).

    python benchmarks/serve_client.py                # 16 in flight, 8 tokens an answer
    python benchmarks/serve_client.py --quick        # what the test suite runs
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from _options import paired_ratios  # benchmarks/, beside this script

MODEL = "stub"


def stub(new_tokens: int, end_after_ms: float = 0.0) -> None:
    """Serve instant streamed completions on a free port, printed first, each stream ended
    `end_after_ms` after its [DONE] (as a server may end it); GET /connections gives the
    connections opened since it was last asked."""
    from aiohttp import web

    peers: set[object] = set()
    text = {"id": "c", "object": "text_completion", "model": MODEL}
    chunk = "data: " + json.dumps(text | {"choices": [{"index": 0, "text": " word"}]}) + "\n\n"
    usage = {"prompt_tokens": 8, "completion_tokens": new_tokens, "total_tokens": 8 + new_tokens}
    tail = "data: " + json.dumps(text | {"choices": [], "usage": usage}) + "\n\ndata: [DONE]\n\n"
    body = (chunk * new_tokens + tail).encode()

    async def complete(request: web.Request) -> web.StreamResponse:
        peers.add(request.transport.get_extra_info("peername") if request.transport else None)
        await request.read()
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        await response.write(body)
        if end_after_ms:
            await asyncio.sleep(end_after_ms / 1e3)
        await response.write_eof()
        return response

    async def connections(request: web.Request) -> web.Response:
        count = len(peers)
        peers.clear()
        return web.json_response({"connections": count})

    async def main() -> None:
        app = web.Application()
        app.router.add_post("/v1/completions", complete)
        app.router.add_get("/connections", connections)
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        print(port, flush=True)
        await asyncio.Event().wait()

    asyncio.run(main())


def opened(url: str) -> int:
    with urllib.request.urlopen(f"{url}/connections", timeout=10) as answer:
        count: int = json.load(answer)["connections"]
        return count


def accelbench_rate(url: str, in_flight: int, new_tokens: int, steps: int) -> float:
    """The serve scenario's closed loop: its steady requests per second."""
    from accelbench.records.spec import RunSpec
    from accelbench.scenarios.serve import ServeMetrics
    from accelbench.scenarios.serve import measure as serve

    spec = RunSpec.model_validate(
        {
            "workload": f"served/{MODEL}",
            "scenario": "serve",
            "endpoint": url,
            "batch_size": in_flight,
            "epochs": 2,
            "steps_per_epoch": steps,
            "window_steps": 1,
            "min_steady_s": 0.0,  # exactly its epochs, as the bare loop times one
            "new_tokens": new_tokens,
            "prompt_tokens": 8,
            "rate_per_s": 1000.0,  # one arrival trial of milliseconds after the loop: no search
            "num_queries": 2,
            "device": "cpu",
        }
    )
    record = serve.measure(spec).of(ServeMetrics)
    assert record is not None and not any(r.error for r in record.trials[0].requests)
    return record.trials[0].requests_per_s


def bare_rate(url: str, in_flight: int, new_tokens: int, steps: int) -> float:
    """The same closed loop in bare aiohttp: one warm-up epoch, then one timed."""
    import aiohttp

    body = {
        "model": MODEL,
        "prompt": "word " * 8,
        "max_tokens": new_tokens,
        "temperature": 0,
        "stream": True,
        "stream_options": {"include_usage": True},
    }

    async def loop(session: aiohttp.ClientSession, count: int) -> None:
        todo = iter(range(count))

        async def client() -> None:
            for _ in todo:
                chunks, text = [], []
                async with session.post(f"{url}/v1/completions", json=body) as response:
                    async for line in response.content:  # to its end: the connection is kept
                        if line.startswith(b"data:") and not line.startswith(b"data: [DONE]"):
                            chunk = json.loads(line[5:])  # the protocol: each chunk's text
                            if chunk["choices"] and chunk["choices"][0].get("text"):
                                text.append(chunk["choices"][0]["text"])
                                chunks.append(time.perf_counter())

        await asyncio.gather(*(client() for _ in range(in_flight)))

    async def main() -> float:
        connector = aiohttp.TCPConnector(limit=0)
        async with aiohttp.ClientSession(connector=connector) as session:
            await loop(session, steps * in_flight)
            start = time.perf_counter()
            await loop(session, steps * in_flight)
            return steps * in_flight / (time.perf_counter() - start)

    return asyncio.run(main())


def main() -> None:
    options = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    options.add_argument("--in-flight", type=int, default=16)
    options.add_argument("--new-tokens", type=int, default=8)
    options.add_argument("--steps", type=int, default=400, help="requests per client an epoch")
    options.add_argument("--rounds", type=int, default=8, help="paired rounds (the median's)")
    options.add_argument("--quick", action="store_true", help="4 in flight, 2 rounds of 10")
    options.add_argument("--device", help="ignored: a client needs no device")
    options.add_argument("--stub", action="store_true", help=argparse.SUPPRESS)
    options.add_argument("--end-after-ms", type=float, default=0.0, help=argparse.SUPPRESS)
    args = options.parse_args()
    if args.stub:
        stub(args.new_tokens, args.end_after_ms)
        return
    if args.quick:
        args.in_flight, args.steps, args.rounds = 4, 10, 2
    server = subprocess.Popen(
        [sys.executable, str(Path(__file__)), "--stub", "--new-tokens", str(args.new_tokens)],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert server.stdout is not None
        url = f"http://127.0.0.1:{server.stdout.readline().strip()}"
        shape = (url, args.in_flight, args.new_tokens, args.steps)
        used: dict[str, list[int]] = {"accelbench": [], "bare": []}

        def counted(name: str, rate: float) -> float:
            used[name].append(opened(url))
            return rate

        opened(url)
        ratios = paired_ratios(
            lambda: counted("accelbench", accelbench_rate(*shape)),
            lambda: counted("bare", bare_rate(*shape)),
            args.rounds,
            "requests/s",
        )
    finally:
        server.terminate()
        server.wait(10)
    print(
        f"serve client, {args.in_flight} in flight, {args.new_tokens} tokens an answer, against "
        f"an instant stub: accelbench/bare {statistics.median(ratios):.3f} "
        f"(range {min(ratios):.3f}-{max(ratios):.3f}); connections a round: accelbench "
        f"{max(used['accelbench'])}, bare {max(used['bare'])} "
        f"(one per request in flight: {args.in_flight})"
    )
    print(f"ratio accelbench/bare: {statistics.median(ratios):.3f}")


if __name__ == "__main__":
    main()
