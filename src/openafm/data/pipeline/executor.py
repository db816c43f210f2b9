"""Where the pipeline's per-shard work runs — in this process or as Ray Data tasks — while every decision stays the same code.

The pipeline hands an executor two kinds of work, both made of picklable jobs over plain rows (dicts of strings):

    map(job, rows)                  -> job(row) for every row, results in row order      (a stage over its shards)
    shuffle(emit, rows, reduce)     -> reduce(group) for every key that emit(row) produced (dedup's LSH buckets)

``LocalExecutor`` runs them in this process, one after another, with a tqdm line. ``RayExecutor`` runs them on
Ray Data: ``from_items(rows).map(job)`` on an actor pool of ``workers`` one-CPU actors, and ``flat_map(emit)
.groupby("key").map_groups(reduce)`` for the shuffle, on a local Ray it starts (``ray.init(num_cpus=workers)``) or
a cluster it joins (``address``). A job writes its own outputs atomically and its done-marker, so what a run
finished is on disk whichever executor ran it; a task whose worker dies is retried by Ray and simply rewrites
the same bytes.
"""

from __future__ import annotations

import base64
import contextlib
import enum
import json
import logging
import pickle
import socket
from abc import ABC, abstractmethod
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Self

from tqdm import tqdm

from openafm.errors import ConfigError, OpenAFMError

Row = dict[str, Any]


class ExecutorKind(enum.Enum):
    LOCAL = "local"   # this process, one shard after another (the default; nothing to start)
    RAY = "ray"       # Ray Data tasks on a local Ray with `workers` CPUs, or on the cluster at `address`


class ExecutorError(OpenAFMError, RuntimeError):
    """The executor cannot run: a Ray address that cannot be reached, a cluster without CPUs (names which)."""


@dataclass(frozen=True, kw_only=True)
class ExecutorConfig:
    kind: ExecutorKind = ExecutorKind.LOCAL
    address: str | None = None      # ray only: "HOST:PORT" of a running cluster's head; None = start a local Ray
    workers: int = 1                 # ray only: concurrent one-CPU workers

    def __post_init__(self) -> None:
        if not isinstance(self.kind, ExecutorKind):
            raise ConfigError(f"executor kind {self.kind!r} is not one of {[k.value for k in ExecutorKind]}")
        if self.workers < 1:
            raise ConfigError(f"executor workers must be >= 1, got {self.workers}")
        if self.kind is ExecutorKind.LOCAL and (self.workers != 1 or self.address is not None):
            raise ConfigError(f"the local executor runs in this process (workers 1, no address); got workers "
                              f"{self.workers}, address {self.address!r}: use --executor ray for more workers or a cluster")
        if self.address is not None and ":" not in self.address:
            raise ConfigError(f"Ray address {self.address!r} is not HOST:PORT (e.g. 127.0.0.1:6379)")


class Executor(ABC):
    """Runs jobs over rows. ``desc`` names the work on the progress line."""

    workers: int = 1

    @abstractmethod
    def map(self, job: Callable[[Row], Row], rows: list[Row], desc: str) -> list[Row]:
        """``[job(row) for row in rows]``, possibly in parallel; the results come back in the order of ``rows``."""

    @abstractmethod
    def shuffle(self, emit: Callable[[Row], list[Row]], rows: list[Row],
                reduce: Callable[[list[Row]], list[Row]], desc: str) -> list[Row]:
        """Every row ``emit`` produces carries a "key"; ``reduce`` gets all rows of one key (any order, any key
        order) and returns result rows; the concatenated results come back in no particular order."""

    def close(self) -> None:
        """Release what the executor started."""

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class LocalExecutor(Executor):
    def __init__(self, progress: bool = True):
        self.progress = progress

    def map(self, job, rows, desc):
        return [job(row) for row in tqdm(rows, desc=desc, unit="shard", disable=not self.progress, leave=False)]

    def shuffle(self, emit, rows, reduce, desc):
        groups: dict[Any, list[Row]] = defaultdict(list)
        for row in tqdm(rows, desc=desc, unit="shard", disable=not self.progress, leave=False):
            for out in emit(row):
                groups[out["key"]].append(out)
        return [result for group in groups.values() for result in reduce(group)]


@dataclass(frozen=True)
class _Indexed:
    """A job applied to a Ray Data row that carries its position. The result travels as JSON (its nested counts
    would otherwise become Arrow structs); an error the job raises travels back pickled, because Ray Data wraps it
    in a UserCodeException that loses it, and the caller should see the job's own typed error."""

    job: Callable[[Row], Row]

    def __call__(self, row: Row) -> Row:
        try:
            result = json.dumps(self.job({k: v for k, v in row.items() if k != "_index"}))
            return {"_index": row["_index"], "_result": result, "_error": ""}
        except Exception as e:  # noqa: BLE001 - handed back to the driver, which raises it
            try:
                error = pickle.dumps(e)
            except Exception:  # noqa: BLE001 - an exception that does not pickle travels as its text
                error = pickle.dumps(ExecutorError(f"{type(e).__name__}: {e}"))
            return {"_index": row["_index"], "_result": "", "_error": base64.b64encode(error).decode()}


class RayExecutor(Executor):
    def __init__(self, config: ExecutorConfig, progress: bool = True):
        import ray  # on use: importing ray costs ~1 s, and the local executor never needs it
        import ray.data
        from ray.data.context import ShuffleStrategy

        if config.address is not None:
            _check_reachable(config.address)
        self._ray = ray
        self._started = not ray.is_initialized()
        if self._started:
            kwargs = {"num_cpus": config.workers} if config.address is None else {"address": config.address}
            try:
                ray.init(include_dashboard=False, logging_level="ERROR", **kwargs)
            except ConnectionError as e:
                raise ExecutorError(f"cannot join the Ray cluster at {config.address}: {e}") from None
        cpus = int(ray.cluster_resources().get("CPU", 0))
        if cpus < 1:
            raise ExecutorError(f"the Ray cluster at {config.address or 'local'} has no CPUs to run on")
        self.workers = min(config.workers, cpus)
        self._tasks = ray.data.TaskPoolStrategy(size=self.workers)   # tasks, not actors: Ray keeps its worker
        logging.getLogger("ray.data").setLevel(logging.WARNING)       # processes (and their imports) between stages
        context = ray.data.DataContext.get_current()
        context.enable_progress_bars = progress
        context.execution_options.preserve_order = False     # results carry their row's index instead
        # the sort-based shuffle runs as plain tasks; the default hash shuffle starts aggregator actors (new processes)
        # and took 2-3x longer on dedup's ~50k bucket rows here
        context.shuffle_strategy = ShuffleStrategy.SORT_SHUFFLE_PULL_BASED

    def map(self, job, rows, desc):
        import ray.data

        if not rows:
            return []
        items = [{**row, "_index": i} for i, row in enumerate(rows)]
        ds = ray.data.from_items(items, override_num_blocks=len(items))
        out = sorted(ds.map(_Indexed(job), compute=self._tasks, num_cpus=1).take_all(), key=lambda r: r["_index"])
        for r in out:                           # every other row has finished (and written its marker) by now
            if r["_error"]:
                raise pickle.loads(base64.b64decode(r["_error"]))
        return [json.loads(r["_result"]) for r in out]

    def shuffle(self, emit, rows, reduce, desc):
        import ray.data

        if not rows:
            return []
        ds = ray.data.from_items(rows, override_num_blocks=len(rows))
        keyed = ds.flat_map(lambda row: [{"key": r["key"], "row": json.dumps(r)} for r in emit(row)],
                            compute=self._tasks, num_cpus=1)

        def reduce_batch(batch: dict) -> dict:
            results = reduce([json.loads(r) for r in batch["row"]])
            return {"result": [json.dumps(r) for r in results]}

        with _job_errors():
            out = keyed.groupby("key", num_partitions=4 * self.workers).map_groups(
                reduce_batch, batch_format="numpy", compute=self._tasks, num_cpus=1).take_all()
        return [json.loads(r["result"]) for r in out]

    def close(self) -> None:
        if self._started and self._ray.is_initialized():
            self._ray.shutdown()


@contextlib.contextmanager
def _job_errors():
    """Ray Data reports an error raised in the shuffle's emit or reduce as a UserCodeException that has lost the
    original; raise it as an ExecutorError carrying the remote traceback's last line (the original's message)."""
    try:
        yield
    except Exception as e:
        if not type(e).__module__.startswith("ray."):
            raise
        lines = [ln for ln in str(e).splitlines() if ln.strip() and not ln.startswith(" ")]
        origin = next((ln for ln in reversed(lines) if "Error" in ln.split(":")[0] and "ray." not in ln), lines[-1])
        raise ExecutorError(f"a shuffle task failed: {origin}") from None


def _check_reachable(address: str) -> None:
    """ray.init retries an unreachable address for minutes; a plain TCP connect says so at once."""
    host, _, port = address.rpartition(":")
    try:
        with socket.create_connection((host, int(port)), timeout=5):
            pass
    except (OSError, ValueError) as e:
        raise ExecutorError(f"cannot reach a Ray cluster at {address} ({e}); start one with `ray start --head "
                            f"--port {port}` or leave out --address to start a local Ray") from None


def largest_first(rows: list[Row], path_key: str) -> list[Row]:
    """``rows`` ordered by the size of the file each names under ``path_key``, largest first: with N workers the
    last task to start is then a small one, so no worker is left waiting on a straggler."""
    return sorted(rows, key=lambda r: -Path(r[path_key]).stat().st_size)


def open_executor(config: ExecutorConfig, progress: bool = True) -> Executor:
    if config.kind is ExecutorKind.LOCAL:
        return LocalExecutor(progress)
    return RayExecutor(config, progress)
