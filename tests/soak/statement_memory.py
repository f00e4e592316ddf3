"""What autoprep holds per statement it has seen: sends STEP new statement shapes at a time as
unprepared QUERYs (each three times, so that it is admitted and prepared), and after each step
prints the process's anonymous memory with the shapes tracked and the prepared cache's entries
and bytes from /metrics (the book's footprint page, "Memory per statement"). With --literal,
PREPAREs of one shape with a new literal each instead (answered from the shape, each filed in
the map of statements prepared with literals inline), and that map's count and bytes.

    python tests/soak/statement_memory.py HOST PORT PID ADMIN [STATEMENTS] [--literal]

HOST:PORT is a running autoprep (PID its process, ADMIN its admin address) in front of a node;
keyspace `shapemem` is created there. STATEMENTS defaults to 2,000, in steps of 250.
"""
import sys
import time
import urllib.request

from cassandra.cluster import Cluster
from cassandra.query import SimpleStatement

from drift import anon_kib

STEP = 250


def metric(admin, name):
    text = urllib.request.urlopen(f"http://{admin}/metrics").read().decode()
    for line in text.splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    return None


def main():
    literal = "--literal" in sys.argv
    args = [a for a in sys.argv[1:] if a != "--literal"]
    host, port, pid, admin = args[0], int(args[1]), int(args[2]), args[3]
    total = int(args[4]) if len(args) > 4 else 2000
    counted = (("literal_statements", "literal_statements_bytes") if literal else
               ("shapes_tracked", "cache_entries", "cache_bytes"))
    cluster = Cluster([host], port=port, protocol_version=4)
    s = cluster.connect()
    s.execute("CREATE KEYSPACE IF NOT EXISTS shapemem WITH replication = "
              "{'class': 'SimpleStrategy', 'replication_factor': 1}")
    s.execute("CREATE TABLE IF NOT EXISTS shapemem.t (k int PRIMARY KEY, v text)")
    s.execute("INSERT INTO shapemem.t (k, v) VALUES (1, 'x')")

    def row(sent):
        print(sent, anon_kib(pid), *(metric(admin, f"autoprep_{m}") for m in counted),
              flush=True)

    print("statements_sent anon_kib", *counted, flush=True)
    held = []
    row(0)
    for n in range(0, total, STEP):
        for i in range(n, n + STEP):
            if literal:
                # Kept, as an application keeps what it prepared.
                held.append(s.prepare(f"SELECT v FROM shapemem.t WHERE k = {i}"))
                continue
            for k in range(1, 4):
                s.execute(SimpleStatement(f"SELECT v AS a{i} FROM shapemem.t WHERE k = {k}"))
        time.sleep(1.5)  # the allocator returns pages freed for a second (see main.rs)
        row(n + STEP)
    cluster.shutdown()


if __name__ == "__main__":
    main()
