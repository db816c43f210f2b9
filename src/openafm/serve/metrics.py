"""Server metrics in the Prometheus text format (no client library: a few counters, gauges and histograms).

`Metrics` is updated from the event loop only; `render()` writes the exposition text for GET /metrics:
requests by endpoint and status, output tokens, tokens/s over the last 10 seconds, queue depth and running
requests (read from the engine when rendered), and histograms of time to first token and inter-token latency.
"""

from __future__ import annotations

import collections
import time

LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
RATE_WINDOW = 10.0


class Histogram:
    def __init__(self, buckets: tuple[float, ...] = LATENCY_BUCKETS):
        self.buckets, self.counts, self.total, self.n = buckets, [0] * len(buckets), 0.0, 0

    def observe(self, value: float) -> None:
        for i, bound in enumerate(self.buckets):
            if value <= bound:
                self.counts[i] += 1
        self.total += value
        self.n += 1

    def lines(self, name: str) -> list[str]:
        out = [f'{name}_bucket{{le="{b}"}} {c}' for b, c in zip(self.buckets, self.counts)]
        return out + [f'{name}_bucket{{le="+Inf"}} {self.n}', f"{name}_sum {self.total:.6f}", f"{name}_count {self.n}"]


class Metrics:
    def __init__(self):
        self.requests: collections.Counter[tuple[str, int]] = collections.Counter()
        self.tokens = 0
        self.ttft, self.itl = Histogram(), Histogram()
        self._recent: collections.deque[tuple[float, int]] = collections.deque()

    def request(self, endpoint: str, status: int) -> None:
        self.requests[(endpoint, status)] += 1

    def token(self, n: int = 1) -> None:
        now = time.monotonic()
        self.tokens += n
        self._recent.append((now, n))

    def tokens_per_second(self) -> float:
        now = time.monotonic()
        while self._recent and self._recent[0][0] < now - RATE_WINDOW:
            self._recent.popleft()
        return sum(n for _, n in self._recent) / RATE_WINDOW

    def render(self, *, waiting: int, running: int) -> str:
        lines = ["# HELP openafm_requests_total Requests answered, by endpoint and HTTP status.",
                 "# TYPE openafm_requests_total counter"]
        lines += [f'openafm_requests_total{{endpoint="{e}",status="{s}"}} {c}'
                  for (e, s), c in sorted(self.requests.items())]
        lines += ["# HELP openafm_output_tokens_total Tokens generated.", "# TYPE openafm_output_tokens_total counter",
                  f"openafm_output_tokens_total {self.tokens}",
                  "# HELP openafm_tokens_per_second Output tokens per second over the last 10 seconds.",
                  "# TYPE openafm_tokens_per_second gauge", f"openafm_tokens_per_second {self.tokens_per_second():.3f}",
                  "# HELP openafm_queue_depth Requests waiting for a batch row.", "# TYPE openafm_queue_depth gauge",
                  f"openafm_queue_depth {waiting}",
                  "# HELP openafm_running_requests Rows generating in the batch.",
                  "# TYPE openafm_running_requests gauge", f"openafm_running_requests {running}",
                  "# HELP openafm_time_to_first_token_seconds From request to first token.",
                  "# TYPE openafm_time_to_first_token_seconds histogram"]
        lines += self.ttft.lines("openafm_time_to_first_token_seconds")
        lines += ["# HELP openafm_inter_token_latency_seconds Between consecutive tokens of one request.",
                  "# TYPE openafm_inter_token_latency_seconds histogram"]
        lines += self.itl.lines("openafm_inter_token_latency_seconds")
        return "\n".join(lines) + "\n"
