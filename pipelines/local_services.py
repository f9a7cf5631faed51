"""The local cluster ``make cluster-up`` started, as ``ldp-marginals run`` finds it: the file it records
its ports and process ids in (``.jvm/run/cluster.json`` under the repository's root, written by
``deploy/local/cluster.py``, removed by ``make cluster-down``). ``run`` reads it when a Kafka job names no
expansion service or no bootstrap servers, or a job goes to the recorded job server, and says which parts it
used: on the session cluster (``make cluster-up``'s default) a streaming job gets that Flink's REST address
(``--flink_master``) and checkpoints (:data:`CHECKPOINT_MS` unless it names an interval), so that Ctrl-C
cancels it there and prints the command that resumes it from its last retained checkpoint; on the job
server's embedded Flink (``FLINK=local``) the REST ports of that Flink (``--flink-rest``), where Ctrl-C
cancels it, and nothing resumes (Beam 2.62 applies ``--savepoint_path`` only to a remote Flink)."""
from __future__ import annotations

import json
import os
from dataclasses import dataclass

# the one definition of where the record lives (deploy/local/cluster.py writes it there)
CLUSTER_DIR = os.path.join(".jvm", "run")
CLUSTER_FILE = "cluster.json"
ENV = "LDP_MARGINALS_CLUSTER"   # another record's path (a cluster-up run from elsewhere)
# a streaming job on the recorded session cluster that names no --checkpointing_interval checkpoints this
# often: a stop then has a retained checkpoint to resume from (files appear up to one interval later)
CHECKPOINT_MS = 5000


@dataclass(frozen=True)
class LocalCluster:
    """What ``run`` takes from the record: where each part answers."""

    path: str
    bootstrap: str          # Kafka, HOST:PORT
    expansion_service: str  # Kafka IO's expansion service, HOST:PORT
    job_endpoint: str       # Beam's Flink job server, HOST:PORT
    embedded_rest: str      # flink=local: the REST ports of the job server's Flink, HOST:FIRST-LAST ("" otherwise)
    flink_master: str = ""  # flink=session: its JobManager's REST address, HOST:PORT ("" otherwise)
    staged_jar: str = ""    # flink=session: the one small jar a job stages (its classes are on the cluster's classpath)


def record_path() -> str:
    return os.environ.get(ENV) or os.path.join(CLUSTER_DIR, CLUSTER_FILE)


def _alive(pid) -> bool:
    try:
        os.kill(int(pid), 0)
    except (OSError, ValueError, TypeError):
        return False
    return True


def find_cluster(path: str | None = None) -> tuple:
    """``(LocalCluster or None, why not)``: the cluster recorded at ``path`` (default :func:`record_path`)
    whose expansion service's process still runs; else None and a sentence (empty when there is no record)."""
    path = path or record_path()
    if not os.path.exists(path):
        return None, ""
    try:
        with open(path) as fh:
            rec = json.load(fh)
        pids = rec.get("pids") or {}
        session = rec.get("flink") == "session"
        found = LocalCluster(path, f"127.0.0.1:{int(rec['kafka_port'])}", f"localhost:{int(rec['expansion_port'])}",
                             f"localhost:{int(rec['job_port'])}", str(rec.get("embedded_rest") or ""),
                             f"localhost:{int(rec['rest_port'])}" if session else "",
                             str(rec.get("staged_jar") or "") if session else "")
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as err:
        return None, f"{path} is not a cluster record ({type(err).__name__}); `make cluster-up` writes one"
    if not _alive(pids.get("expansion")):
        return None, (f"{path} records a cluster whose expansion service (process {pids.get('expansion')}) is not "
                      "running: `make cluster-down` then `make cluster-up`")
    return found, ""
