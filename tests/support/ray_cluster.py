"""A Ray cluster of three nodes on 127.0.0.1, for the ray engine's test: run as a script.

``python -m tests.support.ray_cluster TEMP_DIR`` starts a head node that runs no tasks
(``num_cpus=0``) and two worker nodes of one CPU each, prints the head's address on one line,
and keeps the cluster up until its standard input is closed; then it stops every process of the
cluster it started. Every node listens on the loopback address only, with no dashboard and no
usage statistics.
"""

from __future__ import annotations

import os
import sys

# read by Ray when it is imported: keep 127.0.0.1 (Ray otherwise swaps in the machine's address)
os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"
os.environ["RAY_USAGE_STATS_ENABLED"] = "0"

# imported after the switches above, which Ray reads when it is imported
from ray.cluster_utils import Cluster

WORKER_NODES = 2


def main(temp_dir: str) -> None:
    # Ray writes the cluster's address under $RAY_TMPDIR/ray (default /tmp/ray, which it does not
    # make): the test's own folder instead, so that nothing is written outside it
    os.environ["RAY_TMPDIR"] = temp_dir
    os.makedirs(os.path.join(temp_dir, "ray"), exist_ok=True)
    common = {"node_ip_address": "127.0.0.1", "object_store_memory": 80 * 1024 * 1024}
    cluster = Cluster(initialize_head=True, head_node_args={
        **common, "num_cpus": 0, "include_dashboard": False, "temp_dir": temp_dir})
    try:
        for _ in range(WORKER_NODES):
            cluster.add_node(**common, num_cpus=1)
        cluster.wait_for_nodes()
        print(cluster.address, flush=True)
        sys.stdin.read()  # until the test closes it (or exits)
    finally:
        cluster.shutdown()


if __name__ == "__main__":
    main(sys.argv[1])
