"""The Ray executor: jobs (anchors, quality arms) as Ray tasks pinned to their hardware type, CPU tasks
(a sweep's shards) over the cluster's CPUs; results stream back to the driver, the store's only writer.

A node of hardware type H is one started with the custom resource `hw:H`, e.g.
`ray start --address HEAD:6379 --resources '{"hw:H100-SXM": 1}'`; its count is how many anchors
may run on that node at once (1: measurements never share a machine). Each anchor runs on a node of
its arm's card (the job's `hardware_of`); a card no node offers is an error before anything is submitted,
and an anchor whose card's last node left the cluster is recorded failed instead of waiting forever.
"""

from __future__ import annotations

import logging
import os
import socket
from typing import Any, Callable, Iterable, Iterator

LOCAL_OBJECT_STORE_BYTES = 300 * 2**20  # a local cluster's results are a few MB; leave memory to the engine
LOCAL_HARDWARE = "this-cpu"  # what `--ray local` (this machine) offers
POLL_S = 2.0  # how often a wait checks that every pending task's card still has a node


class NodeLost(RuntimeError):
    """A pending task's hardware type has no node left in the cluster (its node died or left)."""


def hardware_resource(hardware: str) -> str:
    return f"hw:{hardware}"


def _placed(task: Callable, *args: Any) -> tuple[Any, dict]:
    """`task(*args)` in a Ray worker, with where it ran as Ray placed it: the node and the resources
    (hw:<card>) it held there."""
    import ray

    result = task(*args)
    ctx = ray.get_runtime_context()
    return result, {"node_id": ctx.get_node_id(), "resources": ctx.get_assigned_resources()}


def _lost(e: BaseException) -> str:
    """One line saying why a task came back without a result (its worker or node died, or it raised)."""
    cause = getattr(e, "cause", None)
    first = (str(cause or e).strip().splitlines() or [""])[0]
    return f"lost on Ray ({type(cause or e).__name__}): {first}"[:500]


def _check_reachable(address: str) -> None:
    """Fail in seconds on a HOST:PORT nobody answers at (ray.init would retry for minutes)."""
    host, sep, port = address.split("://")[-1].rpartition(":")
    if not sep or not port.isdigit():
        return  # `auto` and the like: Ray resolves them and fails fast itself
    try:
        socket.create_connection((host, int(port)), timeout=5).close()
    except OSError as e:
        raise ConnectionError(f"nothing listens at {host}:{port}: {e.strerror or e}") from None


class RayExecutor:
    """Runs jobs on a Ray cluster this process is connected to. `max_retries`: reruns of a job whose
    worker or node died, before it comes back lost."""

    here = False

    def __init__(self, address: str, *, max_retries: int = 1, disconnect: bool = True):
        self.address, self.max_retries = address, max_retries
        self.disconnect = disconnect  # False when this process was connected before us: leave it so

    @classmethod
    def connect(cls, address: str, **kw: Any) -> "RayExecutor":
        """`local`: start a cluster in this process (this machine, offering `hw:this-cpu`);
        `auto` or HOST:PORT: join a running one."""
        try:
            import ray
        except ImportError:
            raise ValueError(
                f"--ray {address}: Ray is not installed; pip install 'pareto-atlas[ray]', "
                "or leave out --ray to run in-process"
            ) from None
        if ray.is_initialized():
            return cls(address, disconnect=False, **kw)
        try:
            if address == "local":
                ray.init(
                    num_cpus=os.cpu_count() or 2,
                    resources={hardware_resource(LOCAL_HARDWARE): 1},
                    object_store_memory=LOCAL_OBJECT_STORE_BYTES,
                    include_dashboard=False,
                    logging_level=logging.WARNING,
                    configure_logging=True,
                )
            else:
                _check_reachable(address)
                ray.init(address=address, logging_level=logging.WARNING)
        except (ConnectionError, RuntimeError, ValueError, TimeoutError) as e:
            first = (str(e).strip().splitlines() or [type(e).__name__])[0]
            raise ValueError(
                f"--ray {address}: no Ray cluster reachable there ({first[:200]}); allowed: "
                "HOST:PORT of a running head, auto (RAY_ADDRESS or a local `ray start --head`), "
                "or local"
            ) from None
        return cls(address, **kw)

    def _require(self, hardware: Iterable[str]) -> None:
        """Every hardware type the jobs name has a node in the cluster, or one line naming the first that
        has none and what the nodes offer (checked before anything is submitted: a task for a resource no
        node has would wait forever)."""
        import ray

        have = ray.cluster_resources()
        for hw in dict.fromkeys(hardware):
            resource = hardware_resource(hw)
            if not have.get(resource):
                offered = ", ".join(sorted(k for k in have if k.startswith("hw:"))) or "no hw:<card> resource"
                raise ValueError(
                    f"--ray {self.address}: no node offers hardware {hw} (resource {resource!r}; nodes "
                    f"offer {offered}); start one with ray start --address HEAD:6379 --resources "
                    f"'{{\"{resource}\": 1}}'"
                )

    def _stream(
        self, submitted: dict, lost: Callable[[Any, BaseException], tuple], hardware_of: Callable[[Any], str]
    ) -> Iterator[tuple]:
        """Yield (key, result) as tasks finish; a task without a result yields lost(key, error), and so
        does one still pending when no node of its hardware type is left (Ray would keep it forever)."""
        import ray
        from ray.exceptions import RayError

        try:
            while submitted:
                ready, _ = ray.wait(list(submitted), num_returns=1, timeout=POLL_S)
                if not ready:
                    have = ray.cluster_resources()
                    for ref in [r for r in submitted if not have.get(hardware_resource(hardware_of(submitted[r])))]:
                        key = submitted.pop(ref)
                        ray.cancel(ref, force=True)
                        hw = hardware_of(key)
                        yield (
                            key,
                            lost(
                                key,
                                NodeLost(
                                    f"no node offering hw:{hw} is left in the cluster "
                                    f"(its node died or left mid-anchor)"
                                ),
                            ),
                        )
                    continue
                key = submitted.pop(ready[0])
                try:
                    yield key, ray.get(ready[0])
                except RayError as e:  # RayTaskError, WorkerCrashedError, NodeDiedError, ObjectLostError, ...
                    yield key, lost(key, e)
        finally:  # interrupted: nothing still running will be written, so stop it
            for ref in submitted:
                ray.cancel(ref, force=True)

    def _pinned(self, fn, name: str) -> Callable[[str], Any]:
        """`fn` as a Ray task, per hardware type: it runs only on a node of that type, one at a time there,
        retried on a lost worker but never on its own exception (a failed anchor is a result)."""
        import ray

        remote = ray.remote(fn)
        return lambda hw: remote.options(
            resources={hardware_resource(hw): 1},
            num_cpus=1,
            name=name,
            max_retries=self.max_retries,
            retry_exceptions=False,
        )

    def run(
        self,
        task: Callable,
        jobs: Iterable,
        *,
        shared: tuple = (),
        hardware_of: Callable[[Any], str],
        lost: Callable[[Any, str], Any],
        name: str,
    ) -> Iterator[tuple[Any, Any, dict]]:
        import ray

        todo = list(jobs)  # every skip decision is made before anything runs
        if not todo:
            return
        self._require(hardware_of(j) for j in todo)
        pinned = self._pinned(_placed, name)
        refs = [ray.put(x) for x in shared]  # sent once, not once a task
        submitted = {pinned(hardware_of(j)).remote(task, *refs, j): j for j in todo}
        for job, got in self._stream(submitted, lambda j, e: (lost(j, _lost(e)), {}), hardware_of):
            result, where = got
            yield job, result, where

    def map(self, task: Callable, args: list, *, shared: tuple = (), name: str) -> list:
        import ray

        remote = ray.remote(task).options(num_cpus=1, name=name)
        refs = [ray.put(x) for x in shared]
        return ray.get([remote.remote(*refs, a) for a in args])

    def width(self) -> int:
        import ray

        return max(1, int(ray.cluster_resources().get("CPU", 1)))

    def close(self) -> None:
        import ray

        if self.disconnect and ray.is_initialized():
            ray.shutdown()  # a local cluster stops with it; a remote one only loses this driver
