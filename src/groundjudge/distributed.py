"""Where a run's batch work runs: in this process (the default) or on a Ray cluster.

``groundjudge run --engine ray`` runs the run inside :func:`ray_engine`. Two stages then hand
their batches to Ray Data instead of looping over them here: the metrics (each batch of pairs
scored by the same function, ``metrics.evaluate.score_pairs``, on some node of the cluster) and
the judge's cache lookup (which items the cache already settles). Everything else, and every
judge call, stays in this process; the outputs are the same as with the default engine.

The stages ask :func:`current` whether a Ray session is on, so no signature between the CLI
and the stages changes with the engine.
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field

from groundjudge.errors import InputError

ENGINES = ("local", "ray")
INSTALL_HINT = "pip install 'groundjudge[ray]'"


@dataclass
class RaySession:
    """A Ray session a run uses; ``nodes``: per stage, the ids of the nodes its batches ran on."""

    address: str
    nodes: dict[str, set[str]] = field(default_factory=dict)

    def ran_on(self, stage: str, node_ids: Iterable[str]) -> None:
        self.nodes.setdefault(stage, set()).update(node_ids)


_SESSION: ContextVar[RaySession | None] = ContextVar("groundjudge_ray_session", default=None)


def current() -> RaySession | None:
    """The Ray session this run's stages use, or None: they run in this process."""
    return _SESSION.get()


@contextmanager
def ray_engine(address: str | None = None) -> Iterator[RaySession]:
    """Run the stages inside on Ray: connect to the cluster at ``address`` (else ``RAY_ADDRESS``,
    which Ray reads itself), or with neither start a local Ray on 127.0.0.1 for this run, with no
    dashboard and no usage statistics, and stop it at the end. A Ray that this process already
    started (``ray.init`` called by the caller) is used as it is and left running."""
    address = address or os.environ.get("RAY_ADDRESS") or None
    if address is None:
        os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")  # nothing reported to Ray's usage statistics
    if (address is None or _on_loopback(address)) and "ray" not in sys.modules:
        # A cluster of this machine alone: every Ray process of it, this driver too, on the
        # loopback address (Ray otherwise swaps 127.0.0.1 for the machine's address, so that
        # other machines could join; this switch, read when Ray is imported, keeps it on the
        # loopback address as Ray does on a laptop).
        os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
    try:
        import ray
        import ray.data
    except ImportError:
        raise InputError.one("command line", None, "--engine",
                             f"the ray engine needs Ray Data, which is not installed: {INSTALL_HINT}") from None
    started = not ray.is_initialized()
    if started:
        if address is None:
            ray.init(_node_ip_address="127.0.0.1", include_dashboard=False, log_to_driver=False,
                     logging_level=logging.WARNING)
        else:
            ray.init(address=address, log_to_driver=False, logging_level=logging.WARNING)
    context = ray.data.DataContext.get_current()
    context.enable_progress_bars = False
    logging.getLogger("ray.data").setLevel(logging.WARNING)
    session = RaySession(ray.get_runtime_context().gcs_address)
    token = _SESSION.set(session)
    try:
        yield session
    finally:
        _SESSION.reset(token)
        if started:
            ray.shutdown()


def _on_loopback(address: str) -> bool:
    host = address.removeprefix("ray://").rsplit(":", 1)[0].strip("[]")
    return host == "localhost" or host.startswith("127.") or host == "::1"
