"""What autoprep holds per statement it has seen: sends STEP new statement shapes at a time as
unprepared QUERYs (each three times, so that it is admitted and prepared), and after each step
prints the process's anonymous memory with the shapes tracked and the prepared cache's entries
and bytes from /metrics (the book's footprint page, "Memory per statement").

    python tests/soak/statement_memory.py HOST PORT PID ADMIN [STATEMENTS]

HOST:PORT is a running autoprep (PID its process, ADMIN its admin address) in front of a node;
keyspace `shapemem` is created there. STATEMENTS defaults to 2,000, in steps of 250.
"""
import sys
import time
import urllib.request

from cassandra.cluster import Cluster
from cassandra.query import SimpleStatement

STEP = 250


def anon_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("RssAnon"):
                return int(line.split()[1])
    return None


def metric(admin, name):
    text = urllib.request.urlopen(f"http://{admin}/metrics").read().decode()
    for line in text.splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    return None


def main():
    host, port, pid, admin = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
    total = int(sys.argv[5]) if len(sys.argv) > 5 else 2000
    cluster = Cluster([host], port=port, protocol_version=4)
    s = cluster.connect()
    s.execute("CREATE KEYSPACE IF NOT EXISTS shapemem WITH replication = "
              "{'class': 'SimpleStrategy', 'replication_factor': 1}")
    s.execute("CREATE TABLE IF NOT EXISTS shapemem.t (k int PRIMARY KEY, v text)")
    s.execute("INSERT INTO shapemem.t (k, v) VALUES (1, 'x')")

    def row(sent):
        print(sent, anon_kib(pid), *(metric(admin, f"autoprep_{m}") for m in
                                     ("shapes_tracked", "cache_entries", "cache_bytes")),
              flush=True)

    print("statements_sent anon_kib shapes_tracked cache_entries cache_bytes", flush=True)
    row(0)
    for n in range(0, total, STEP):
        for i in range(n, n + STEP):
            for k in range(1, 4):
                s.execute(SimpleStatement(f"SELECT v AS a{i} FROM shapemem.t WHERE k = {k}"))
        time.sleep(1.5)  # the allocator returns pages freed for a second (see main.rs)
        row(n + STEP)
    cluster.shutdown()


if __name__ == "__main__":
    main()
