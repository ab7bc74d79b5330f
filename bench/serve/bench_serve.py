#!/usr/bin/env python3
"""bench_serve.py — serving benchmark for any OpenAI-compatible server (tessera serve, vLLM,
llama.cpp's server, ...), in the spirit of `vllm bench serve`.

N requests with a given prompt length and output length are sent by C concurrent clients (or
at a Poisson request rate) as streaming requests; the script reports request throughput,
output tokens/s, time to first token (TTFT), time per output token (TPOT) and inter-token
latency (ITL) as mean / median / p99, and optionally writes them as JSON.

    python3 bench/serve/bench_serve.py --url http://127.0.0.1:8080 \\
        --num-requests 64 --concurrency 16 --input-len 128 --output-len 64

Prompts are random token ids by default (exact lengths; /v1/completions accepts token arrays
in OpenAI's API); --text-prompts sends random words instead (needed for /v1/chat/completions).
Outputs are forced to --output-len with `ignore_eos` (a vLLM/tessera extension; other servers
ignore it and may stop early: the report counts the tokens actually generated, from usage).

Standard library only: runs anywhere Python 3.8+ does. Loopback or your own servers only.
"""
import argparse
import http.client
import json
import random
import statistics
import sys
import threading
import time
import urllib.parse
from concurrent.futures import ThreadPoolExecutor

WORDS = ("time person year way day thing man world life hand part child eye woman place work "
         "week case point number group problem fact river stone light music garden window city "
         "ocean forest market paper story letter table mountain morning evening winter summer").split()


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--url", default="http://127.0.0.1:8080", help="server base URL")
    p.add_argument("--api-key", default=None, help="sent as 'Authorization: Bearer KEY'")
    p.add_argument("--model", default=None, help="model id (default: first of /v1/models)")
    p.add_argument("--endpoint", choices=("completions", "chat"), default="completions")
    p.add_argument("--num-requests", "-n", type=int, default=32)
    p.add_argument("--concurrency", "-c", type=int, default=8, help="clients at once")
    p.add_argument("--request-rate", type=float, default=float("inf"),
                   help="Poisson arrivals per second (default: all at once, limited by -c)")
    p.add_argument("--input-len", type=int, default=64, help="prompt tokens (approximate with "
                   "--text-prompts)")
    p.add_argument("--output-len", type=int, default=32, help="tokens to generate per request")
    p.add_argument("--text-prompts", action="store_true", help="random words, not token ids")
    p.add_argument("--vocab-low", type=int, default=1000, help="lowest random token id")
    p.add_argument("--vocab-high", type=int, default=20000, help="highest random token id")
    p.add_argument("--temperature", type=float, default=0.0)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--timeout", type=float, default=600, help="seconds per request")
    p.add_argument("--json", default=None, help="write the results to this file")
    a = p.parse_args(argv)
    if a.endpoint == "chat":
        a.text_prompts = True
    if a.num_requests < 1 or a.concurrency < 1 or a.input_len < 1 or a.output_len < 1:
        p.error("--num-requests, --concurrency, --input-len and --output-len must be >= 1")
    return a


class Client:
    def __init__(self, url, api_key, timeout):
        u = urllib.parse.urlsplit(url)
        if u.scheme not in ("http", "https"):
            raise SystemExit(f"--url must be http(s)://host:port, got {url!r}")
        self.https = u.scheme == "https"
        self.host = u.hostname
        self.port = u.port or (443 if self.https else 80)
        self.prefix = u.path.rstrip("/")
        if self.prefix.endswith("/v1"):
            self.prefix = self.prefix[:-3]
        self.api_key = api_key
        self.timeout = timeout

    def connect(self):
        cls = http.client.HTTPSConnection if self.https else http.client.HTTPConnection
        return cls(self.host, self.port, timeout=self.timeout)

    def headers(self):
        h = {"Content-Type": "application/json", "Accept": "text/event-stream"}
        if self.api_key:
            h["Authorization"] = "Bearer " + self.api_key
        return h

    def get_json(self, path):
        c = self.connect()
        c.request("GET", self.prefix + path, headers=self.headers())
        r = c.getresponse()
        body = r.read()
        c.close()
        if r.status != 200:
            raise SystemExit(f"GET {path}: HTTP {r.status}: {body[:300]!r}")
        return json.loads(body)


def make_prompt(args, rng):
    if args.text_prompts:
        return " ".join(rng.choice(WORDS) for _ in range(args.input_len))
    return [rng.randint(args.vocab_low, args.vocab_high) for _ in range(args.input_len)]


def one_request(client, args, model, prompt):
    """Sends one streaming request; returns a dict of timings (seconds) and counts."""
    body = {"model": model, "max_tokens": args.output_len, "temperature": args.temperature,
            "stream": True, "stream_options": {"include_usage": True}, "ignore_eos": True}
    if args.endpoint == "chat":
        path = "/v1/chat/completions"
        body["messages"] = [{"role": "user", "content": prompt}]
    else:
        path = "/v1/completions"
        body["prompt"] = prompt
    res = {"ok": False, "ttft": None, "itl": [], "latency": None, "output_tokens": 0,
           "prompt_tokens": 0, "error": None}
    t0 = time.perf_counter()
    try:
        conn = client.connect()
        conn.request("POST", client.prefix + path, body=json.dumps(body),
                     headers=client.headers())
        resp = conn.getresponse()
        if resp.status != 200:
            res["error"] = f"HTTP {resp.status}: {resp.read()[:200]!r}"
            conn.close()
            return res
        last = None
        chunks = 0
        buf = b""
        done = False
        while not done:
            data = resp.read1(65536)
            if not data:
                break
            buf += data
            while b"\n\n" in buf and not done:
                event, buf = buf.split(b"\n\n", 1)
                for line in event.split(b"\n"):
                    if not line.startswith(b"data: "):
                        continue
                    payload = line[6:]
                    if payload == b"[DONE]":
                        done = True
                        break
                    obj = json.loads(payload)
                    if "error" in obj:
                        raise RuntimeError(obj["error"].get("message"))
                    if obj.get("usage"):
                        res["output_tokens"] = obj["usage"]["completion_tokens"]
                        res["prompt_tokens"] = obj["usage"]["prompt_tokens"]
                    for ch in obj.get("choices") or []:
                        text = ch.get("text") if "text" in ch else (ch.get("delta") or {}).get(
                            "content")
                        if text:
                            now = time.perf_counter()
                            if last is None:
                                res["ttft"] = now - t0
                            else:
                                res["itl"].append(now - last)
                            last = now
                            chunks += 1
        conn.close()
        res["latency"] = time.perf_counter() - t0
        if res["output_tokens"] == 0:
            res["output_tokens"] = chunks
        res["ok"] = res["ttft"] is not None
        if not res["ok"]:
            res["error"] = "no tokens received"
    except Exception as e:  # noqa: BLE001 - every failure is counted, not fatal
        res["error"] = repr(e)
    return res


def stats_ms(values):
    if not values:
        return {"mean": None, "median": None, "p99": None}
    v = sorted(values)
    p99 = v[min(len(v) - 1, int(round(0.99 * (len(v) - 1))))]
    return {"mean": statistics.fmean(v) * 1e3, "median": statistics.median(v) * 1e3,
            "p99": p99 * 1e3}


def main(argv=None):
    args = parse_args(argv if argv is not None else sys.argv[1:])
    client = Client(args.url, args.api_key, args.timeout)
    model = args.model or client.get_json("/v1/models")["data"][0]["id"]
    rng = random.Random(args.seed)
    prompts = [make_prompt(args, rng) for _ in range(args.num_requests)]
    print(f"benchmark: {args.num_requests} requests, concurrency {args.concurrency}, "
          f"input {args.input_len} {'words' if args.text_prompts else 'tokens'}, output "
          f"{args.output_len} tokens, {args.endpoint} endpoint, model {model}", flush=True)

    results = [None] * args.num_requests
    lock = threading.Lock()
    done = [0]

    def run(i):
        r = one_request(client, args, model, prompts[i])
        results[i] = r
        with lock:
            done[0] += 1
            if done[0] % max(1, args.num_requests // 10) == 0:
                print(f"  {done[0]}/{args.num_requests} done", flush=True)

    t0 = time.perf_counter()
    with ThreadPoolExecutor(max_workers=args.concurrency) as pool:
        futures = []
        for i in range(args.num_requests):
            if args.request_rate != float("inf") and i > 0:
                time.sleep(rng.expovariate(args.request_rate))
            futures.append(pool.submit(run, i))
        for f in futures:
            f.result()
    duration = time.perf_counter() - t0

    ok = [r for r in results if r["ok"]]
    failed = [r for r in results if not r["ok"]]
    out_tokens = sum(r["output_tokens"] for r in ok)
    in_tokens = sum(r["prompt_tokens"] for r in ok)
    tpot = [(r["latency"] - r["ttft"]) / (r["output_tokens"] - 1) for r in ok
            if r["output_tokens"] > 1]
    summary = {
        "model": model, "endpoint": args.endpoint, "num_requests": args.num_requests,
        "concurrency": args.concurrency, "request_rate": args.request_rate,
        "input_len": args.input_len, "output_len": args.output_len,
        "successful_requests": len(ok), "failed_requests": len(failed),
        "duration_s": duration, "total_input_tokens": in_tokens,
        "total_output_tokens": out_tokens,
        "request_throughput": len(ok) / duration,
        "output_throughput": out_tokens / duration,
        "total_token_throughput": (in_tokens + out_tokens) / duration,
        "ttft_ms": stats_ms([r["ttft"] for r in ok]),
        "tpot_ms": stats_ms(tpot),
        "itl_ms": stats_ms([x for r in ok for x in r["itl"]]),
        "e2e_latency_ms": stats_ms([r["latency"] for r in ok]),
        "errors": sorted({r["error"] for r in failed})[:10],
    }

    def fmt(v):
        return "n/a" if v is None else f"{v:.2f}"

    w = 50
    print("=" * 14 + " Serving Benchmark Result " + "=" * 14)
    rows = [("Successful requests:", len(ok)), ("Failed requests:", len(failed)),
            ("Benchmark duration (s):", f"{duration:.2f}"),
            ("Total input tokens:", in_tokens), ("Total generated tokens:", out_tokens),
            ("Request throughput (req/s):", f"{summary['request_throughput']:.2f}"),
            ("Output token throughput (tok/s):", f"{summary['output_throughput']:.2f}"),
            ("Total token throughput (tok/s):", f"{summary['total_token_throughput']:.2f}")]
    for k, v in rows:
        print(f"{k:<{w - 10}}{v:>10}")
    for title, key in (("Time to First Token", "ttft_ms"), ("Time per Output Token (excl. 1st "
                                                             "token)", "tpot_ms"),
                       ("Inter-token Latency", "itl_ms"), ("End-to-end Latency", "e2e_latency_ms")):
        print(f"{'-' * 4} {title} {'-' * max(4, w - 6 - len(title))}")
        s = summary[key]
        short = key.split("_")[0].upper()
        for stat in ("mean", "median", "p99"):
            label = {"mean": "Mean", "median": "Median", "p99": "P99"}[stat]
            print(f"{label + ' ' + short + ' (ms):':<{w - 10}}{fmt(s[stat]):>10}")
    print("=" * (w + 4))
    if failed:
        print("errors:", *summary["errors"], sep="\n  ")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(summary, f, indent=2)
        print(f"wrote {args.json}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
