"""`openafm serve` under load, against live servers on loopback: continuous batching vs one-at-a-time serving vs
the fm-session path, a 1,000-request soak, and structured outputs on the held-out guided-generation schemas.

Servers are subprocesses (`openafm serve`): the batched one (max batch 32) and the one-at-a-time baseline, the
same engine with `--max-batch 1` (requests queue and run alone, prefix cache included). Clients are asyncio +
httpx, streaming chat completions (greedy, `max_tokens` short), so time to first token and inter-token latency
are measured at the client. Per concurrency c the load is `2c` requests (at least 8); the c=16 pair runs in
`--rounds` alternating rounds (batched, baseline, batched, ...) and the ratio is of the medians.

The fm-session path: the same prompts through `fm.LanguageModelSession.stream_response` (a fresh session per
request, `max_concurrent_requests=c`, each request its own worker thread: concurrency without batching), in a
subprocess of its own, on the framework's default weights.

The soak sends `--soak` requests at concurrency 16, mixing valid (plain and streamed), malformed JSON, bad
parameters, oversized bodies, context overflows, streams cancelled mid-way, and json_schema requests; it counts
5xx answers and lost requests (no complete answer: a transport error, a stream without [DONE]) and reads the
server's RSS before and after.

    python benchmarks/serve_load.py --json > docs/results/serve_load.json
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import statistics
import subprocess
import sys
import time
from pathlib import Path

import httpx
import jsonschema

sys.path.insert(0, os.path.dirname(__file__))
from _common import emit, log, parser  # noqa: E402

MODEL = "smollm2-135m-instruct"
QUESTIONS = ["What is the capital of France?", "Name three colours.", "Write a haiku about the sea.",
             "What is 2+2?", "Who wrote Hamlet?", "Give me a tip for sleeping well.", "What is a prime number?",
             "Describe a cat in one sentence.", "Why is the sky blue?", "Name a famous painter.",
             "What do bees make?", "How many legs does a spider have?", "Suggest a name for a dog.",
             "What is the boiling point of water?", "Translate 'hello' to Spanish.", "What is photosynthesis?"]
ROOT = Path(__file__).resolve().parents[1]


# ---- servers ------------------------------------------------------------------------------------------------

def wait_healthy(url: str, proc: subprocess.Popen, seconds: float, what: str) -> None:
    """Poll `url`/health until it answers 200; raise if `proc` exits first (its stderr, when piped) or time runs out."""
    for _ in range(int(seconds * 10)):
        try:
            if httpx.get(url + "/health", timeout=1).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        if proc.poll() is not None:
            said = proc.stderr.read().decode()[-2000:] if proc.stderr is not None else ""
            raise RuntimeError(f"{what} exited with {proc.returncode}: {said}")
        time.sleep(0.1)
    raise RuntimeError(f"{what} did not start in {seconds:.0f} s")


class Server:
    def __init__(self, port: int, *args: str):
        self.url = f"http://127.0.0.1:{port}"
        env = {**os.environ, "PYTHONPATH": str(ROOT / "src") + os.pathsep + os.environ.get("PYTHONPATH", "")}
        self.proc = subprocess.Popen([sys.executable, "-m", "openafm.cli", "serve", "--port", str(port), *args],
                                     env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        wait_healthy(self.url, self.proc, 120, "openafm serve")

    def rss_mb(self) -> float:
        for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
        return float("nan")

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(30)


def chat_body(i: int, max_tokens: int, **extra) -> dict:
    return {"model": MODEL, "messages": [{"role": "user", "content": QUESTIONS[i % len(QUESTIONS)]}],
            "max_tokens": max_tokens, "temperature": 0, **extra}


# ---- load ---------------------------------------------------------------------------------------------------

async def stream_one(client: httpx.AsyncClient, url: str, body: dict) -> dict:
    start = time.perf_counter()
    times, tokens, done = [], 0, False
    async with client.stream("POST", url + "/v1/chat/completions",
                             json={**body, "stream": True, "stream_options": {"include_usage": True}}) as r:
        if r.status_code != 200:
            return {"status": r.status_code}
        async for line in r.aiter_lines():
            if not line.startswith("data: "):
                continue
            if line == "data: [DONE]":
                done = True
                break
            chunk = json.loads(line[6:])
            if chunk.get("usage"):
                tokens = chunk["usage"]["completion_tokens"]
            if chunk["choices"] and chunk["choices"][0]["delta"].get("content"):
                times.append(time.perf_counter() - start)
    return {"status": 200, "done": done, "tokens": tokens, "times": times, "wall": time.perf_counter() - start}


async def load(url: str, concurrency: int, n: int, max_tokens: int) -> dict:
    sem = asyncio.Semaphore(concurrency)
    async with httpx.AsyncClient(timeout=300, limits=httpx.Limits(max_connections=concurrency + 4)) as client:
        async def one(i):
            async with sem:
                try:
                    return await stream_one(client, url, chat_body(i, max_tokens))
                except httpx.HTTPError as e:
                    return {"status": -1, "error": str(e)}
        start = time.perf_counter()
        results = await asyncio.gather(*(one(i) for i in range(n)))
        wall = time.perf_counter() - start
    return summarize(results, wall, concurrency)


def summarize(results: list[dict], wall: float, concurrency: int) -> dict:
    ok = [r for r in results if r.get("status") == 200 and r.get("done")]
    ttft = [r["times"][0] for r in ok if r["times"]]
    itl = [b - a for r in ok for a, b in zip(r["times"], r["times"][1:])]
    tokens = sum(r["tokens"] for r in ok)
    return {"concurrency": concurrency, "requests": len(results), "errors": len(results) - len(ok),
            "output_tokens": tokens, "wall_s": round(wall, 3), "tokens_per_s": round(tokens / wall, 2),
            "ttft_p50_ms": pct(ttft, 50), "ttft_p99_ms": pct(ttft, 99), "itl_p50_ms": pct(itl, 50),
            "itl_p99_ms": pct(itl, 99)}


def pct(xs: list[float], q: float) -> float | None:
    if not xs:
        return None
    xs = sorted(xs)
    return round(1e3 * xs[min(len(xs) - 1, int(round(q / 100 * (len(xs) - 1))))], 2)


# ---- the fm-session path (a subprocess: --fm-worker) --------------------------------------------------------

def fm_worker(concurrency: int, n: int, max_tokens: int) -> dict:
    import openafm.fm as fm

    model = fm.SystemLanguageModel(max_concurrent_requests=concurrency)
    model.language_model()
    options = fm.GenerationOptions(sampling=fm.SamplingMode.greedy(), maximum_response_tokens=max_tokens)

    async def run() -> dict:
        sem = asyncio.Semaphore(concurrency)

        async def one(i):
            async with sem:
                start, times, last = time.perf_counter(), [], ""
                session = fm.LanguageModelSession(model=model)
                async for text in session.stream_response(QUESTIONS[i % len(QUESTIONS)], options=options):
                    if text != last:
                        times.append(time.perf_counter() - start)
                        last = text
                tokens = len(model.language_model().tokenizer.encode(last))
                return {"status": 200, "done": True, "tokens": tokens, "times": times}
        await one(0)                                                       # warm: build the step, like a server
        start = time.perf_counter()
        results = await asyncio.gather(*(one(i) for i in range(n)))
        return summarize(list(results), time.perf_counter() - start, concurrency)
    return asyncio.run(run())


def fm_session(concurrency: int, n: int, max_tokens: int) -> dict:
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src") + os.pathsep + os.environ.get("PYTHONPATH", "")}
    out = subprocess.run([sys.executable, __file__, "--fm-worker", str(concurrency), str(n), str(max_tokens)],
                         env=env, capture_output=True, text=True, check=True)
    return json.loads(out.stdout)


# ---- soak ---------------------------------------------------------------------------------------------------

SOAK_KINDS = {"valid": 0.35, "valid_stream": 0.15, "malformed": 0.1, "bad_param": 0.1, "oversized": 0.05,
              "overflow": 0.05, "cancelled": 0.1, "constrained": 0.1}
PERSON = {"type": "object", "properties": {"name": {"type": "string", "maxLength": 16},
                                           "age": {"type": "integer", "minimum": 0, "maximum": 120}},
          "required": ["name", "age"], "additionalProperties": False}


async def soak_one(client: httpx.AsyncClient, url: str, kind: str, i: int) -> tuple[str, int, bool]:
    """-> (kind, HTTP status, answered completely)."""
    endpoint = url + "/v1/chat/completions"
    if kind == "malformed":
        r = await client.post(endpoint, content=b'{"model": "x", "messages": [', headers={"content-type": "application/json"})
        return kind, r.status_code, "error" in r.json()
    if kind == "bad_param":
        r = await client.post(endpoint, json=chat_body(i, 8, **random.Random(i).choice(
            [{"temperature": -1}, {"logit_bias": {"5": 1}}, {"n": 0}, {"messages": "hi"}, {"top_p": 2}])))
        return kind, r.status_code, r.json()["error"]["param"] is not None
    if kind == "oversized":
        r = await client.post(endpoint, json=chat_body(i, 8, messages=[{"role": "user", "content": "x" * 1_100_000}]))
        return kind, r.status_code, "error" in r.json()
    if kind == "overflow":
        r = await client.post(endpoint, json=chat_body(i, 5000))
        return kind, r.status_code, r.json()["error"]["param"] == "max_tokens"
    if kind == "cancelled":
        async with client.stream("POST", endpoint, json=chat_body(i, 100, stream=True, temperature=0.8)) as r:
            seen = 0
            async for line in r.aiter_lines():
                seen += line.startswith("data: ")
                if seen >= 3:
                    break                                   # leave mid-stream: the server cancels the row
            return kind, r.status_code, seen >= 3 or r.status_code == 429
    if kind == "valid_stream":
        res = await stream_one(client, url, chat_body(i, 6))
        return kind, res["status"], res.get("done", False) or res["status"] == 429
    extra = {}
    if kind == "constrained":
        extra = {"response_format": {"type": "json_schema", "json_schema": {"name": "p", "schema": PERSON}},
                 "max_tokens": 30}
    r = await client.post(endpoint, json={**chat_body(i, 6), **extra})
    if r.status_code != 200:
        return kind, r.status_code, r.status_code == 429
    content = r.json()["choices"][0]["message"]["content"]
    if kind == "constrained" and r.json()["choices"][0]["finish_reason"] == "stop":
        jsonschema.validate(json.loads(content), PERSON)
    return kind, 200, True


async def soak(url: str, n: int, concurrency: int) -> dict:
    rng = random.Random(0)
    kinds = rng.choices(list(SOAK_KINDS), weights=list(SOAK_KINDS.values()), k=n)
    sem = asyncio.Semaphore(concurrency)
    async with httpx.AsyncClient(timeout=300, limits=httpx.Limits(max_connections=concurrency + 4)) as client:
        async def one(i, kind):
            async with sem:
                try:
                    return await soak_one(client, url, kind, i)
                except Exception as e:                          # noqa: BLE001 - a lost request, counted
                    return kind, -1, False, f"{type(e).__name__}: {e}"
        start = time.perf_counter()
        results = await asyncio.gather(*(one(i, k) for i, k in enumerate(kinds)))
        wall = time.perf_counter() - start
    by_kind: dict[str, dict] = {}
    for kind, status, complete, *_ in results:
        row = by_kind.setdefault(kind, {})
        row[str(status)] = row.get(str(status), 0) + 1
    lost = [r for r in results if not r[2]]
    return {"soak_requests": n, "soak_wall_s": round(wall, 1), "soak_5xx": sum(1 for r in results if r[1] >= 500),
            "soak_lost": len(lost), "soak_status_by_kind": by_kind,
            "soak_lost_examples": [list(r) for r in lost[:5]]}


# ---- structured outputs on held-out schemas -----------------------------------------------------------------

async def structured(url: str, n: int, max_tokens: int) -> dict:
    from openafm.data.guided import Split, guided_example
    counts = {"valid": 0, "invalid": 0, "cut_off": 0, "rejected": 0}
    invalid = []
    async with httpx.AsyncClient(timeout=300) as client:
        async def one(i):
            ex = guided_example(0, i, Split.HELDOUT)
            body = {"model": MODEL, "messages": [{"role": "user", "content": ex.request}], "temperature": 0,
                    "max_tokens": max_tokens,
                    "response_format": {"type": "json_schema", "json_schema": {"name": ex.type_name or "x",
                                                                               "schema": ex.schema, "strict": True}}}
            r = await client.post(url + "/v1/chat/completions", json=body)
            if r.status_code != 200:
                counts["rejected"] += 1
                return
            choice = r.json()["choices"][0]
            if choice["finish_reason"] == "length":
                counts["cut_off"] += 1
                return
            try:
                jsonschema.validate(json.loads(choice["message"]["content"]), ex.schema)
                counts["valid"] += 1
            except (json.JSONDecodeError, jsonschema.ValidationError) as e:
                counts["invalid"] += 1
                invalid.append(f"{ex.where}: {str(e)[:200]}")
        await asyncio.gather(*(one(i) for i in range(n)))
    return {"structured_schemas": n, **{f"structured_{k}": v for k, v in counts.items()},
            "structured_invalid_examples": invalid[:3]}


# ---- main ---------------------------------------------------------------------------------------------------

def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--fm-worker":
        print(json.dumps(fm_worker(*(int(a) for a in sys.argv[2:5]))))
        return
    p = parser(__doc__.split("\n")[0])
    p.add_argument("--max-tokens", type=int, default=16, help="completion tokens per load request")
    p.add_argument("--rounds", type=int, default=2, help="alternating rounds of the c=16 pair")
    p.add_argument("--soak", type=int, default=1000, help="requests in the soak (0: skip)")
    p.add_argument("--structured", type=int, default=16, help="held-out schemas asked through json_schema")
    p.add_argument("--port", type=int, default=8731)
    args = p.parse_args()
    t0 = time.perf_counter()
    batched = Server(args.port, "--max-batch", "32", "--max-queue", "2048")
    single = Server(args.port + 1, "--max-batch", "1", "--max-queue", "2048")
    result: dict = {"max_tokens": args.max_tokens, "model": MODEL}
    try:
        run = lambda url, c: asyncio.run(load(url, c, max(8, 2 * c), args.max_tokens))   # noqa: E731
        result["batched"] = {}
        for c in (1, 4, 32):
            log(f"batched c={c}")
            result["batched"][f"c{c}"] = run(batched.url, c)
        pairs = []
        for r in range(args.rounds):
            log(f"c=16 round {r + 1}: batched, then one at a time")
            pairs.append((run(batched.url, 16), run(single.url, 16)))
        result["batched"]["c16"] = pairs[-1][0]
        result["one_at_a_time"] = {"c16": pairs[-1][1], "c1": run(single.url, 1)}
        b16 = statistics.median(p[0]["tokens_per_s"] for p in pairs)
        s16 = statistics.median(p[1]["tokens_per_s"] for p in pairs)
        result["c16_rounds_tokens_per_s"] = [[p[0]["tokens_per_s"], p[1]["tokens_per_s"]] for p in pairs]
        result["throughput_ratio_c16"] = round(b16 / s16, 3)
        result["throughput_ratio_c16_target"] = 4.0
        result["p99_ttft_ms_c16"] = result["batched"]["c16"]["ttft_p99_ms"]
        single.stop()
        log("fm-session path c=16")
        result["fm_session"] = {"c16": fm_session(16, 32, args.max_tokens)}
        result["throughput_ratio_c16_vs_fm_session"] = round(b16 / result["fm_session"]["c16"]["tokens_per_s"], 3)
        if args.structured:
            log(f"structured outputs on {args.structured} held-out schemas")
            result.update(asyncio.run(structured(batched.url, args.structured, 160)))
        if args.soak:
            result["soak_rss_start_mb"] = round(batched.rss_mb(), 1)
            log(f"soak of {args.soak} requests")
            result.update(asyncio.run(soak(batched.url, args.soak, 16)))
            time.sleep(1)
            result["soak_rss_end_mb"] = round(batched.rss_mb(), 1)
            result["health_after_soak"] = httpx.get(batched.url + "/health").json()
    finally:
        for s in (batched, single):
            if s.proc.poll() is None:
                s.stop()
    result["wall_s"] = round(time.perf_counter() - t0, 1)
    result["load_avg_end"] = os.getloadavg()[0]
    emit(result, args.json)


if __name__ == "__main__":
    main()
