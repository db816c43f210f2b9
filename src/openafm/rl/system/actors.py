"""The Ray side of asynchronous RL: starting (or joining) Ray, and the actors with their resources.

    started = start_ray(config.asynchronous)     # ray.init(address=...) for a cluster, else an embedded local Ray
    actors = Actors.start(config, sync=False)     # coordinator, parameter server, updater, N generators
    ...
    actors.stop(); stop_ray(started)

Each compute actor reserves `*_cpus` Ray CPUs and sets its torch threads, so on the 2-core machine one
generator and the updater get one core each instead of four threads fighting over two. The coordinator and the
parameter server do bookkeeping only (0 CPUs). A generator is restarted by Ray up to max_restarts times after it
dies (a restarted actor reloads the base weights and pulls the published ones before its next batch); its
in-flight calls are not retried by Ray: the driver puts its ticket back and asks again (rl/system/async_run.py).
"""

from __future__ import annotations

import dataclasses

import ray

from openafm.rl.config import AsyncSettings, RLConfig
from openafm.rl.system.buffer import ReplayBuffer
from openafm.rl.system.coordinator import Coordinator
from openafm.rl.system.generator import TrajectoryGenerator
from openafm.rl.system.params import ParameterServer
from openafm.rl.system.tickets import Tickets
from openafm.rl.system.updater import PolicyUpdater


def start_ray(settings: AsyncSettings) -> bool:
    """Join the configured cluster, or start a local Ray unless one runs in this process. -> whether it started
    one (then stop_ray shuts it down)."""
    if ray.is_initialized():
        return False
    if settings.address is not None:
        ray.init(address=settings.address, log_to_driver=False)
    else:
        ray.init(num_cpus=max(2, int(settings.generators * settings.generator_cpus + settings.updater_cpus + 0.999)),
                 object_store_memory=settings.object_store_mb * 2**20, include_dashboard=False,
                 log_to_driver=False)
    return True


def stop_ray(started: bool) -> None:
    if started and ray.is_initialized():
        ray.shutdown()


@dataclasses.dataclass
class Actors:
    coordinator: ray.actor.ActorHandle
    params: ray.actor.ActorHandle
    updater: ray.actor.ActorHandle
    generators: list[ray.actor.ActorHandle]

    @classmethod
    def start(cls, config: RLConfig, *, max_staleness: int) -> Actors:
        """The actors of one run; max_staleness: the tickets' bound (0 for the synchronous schedule)."""
        a = config.asynchronous
        buffer = ReplayBuffer(capacity=a.buffer_capacity, k=config.rloo.k, max_staleness=max_staleness,
                              sampling=a.sampling)
        coordinator = ray.remote(Coordinator).options(num_cpus=0).remote(buffer)
        params = ray.remote(ParameterServer).options(num_cpus=0).remote()
        updater = ray.remote(PolicyUpdater).options(num_cpus=a.updater_cpus).remote(
            config, threads=a.updater_threads)
        generators = [ray.remote(TrajectoryGenerator).options(num_cpus=a.generator_cpus, max_restarts=a.max_restarts)
                      .remote(config, replica=i, coordinator=coordinator, params=params, threads=a.generator_threads)
                      for i in range(a.generators)]                   # they load while the updater does
        sizes = ray.get(updater.pool_sizes.remote())
        tickets = Tickets(pool_sizes=sizes, weights=[s.weight for s in config.prompt_sets], seed=config.seed,
                          prompts_per_batch=config.prompts_per_step, max_staleness=max_staleness)
        ray.get([coordinator.attach_tickets.remote(tickets), updater.attach.remote(coordinator, params)])
        return cls(coordinator, params, updater, generators)

    def handles(self) -> list[ray.actor.ActorHandle]:
        return [*self.generators, self.updater, self.params, self.coordinator]

    def pids(self) -> list[int]:
        return ray.get([h.pid.remote() for h in [*self.generators, self.updater]])

    def stop(self) -> None:
        for h in self.handles():
            ray.kill(h, no_restart=True)
