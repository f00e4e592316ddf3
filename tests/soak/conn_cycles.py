"""Whether autoprep keeps memory per connection it has closed: opens connections through it
in rounds (each a STARTUP and a rewritten literal SELECT of system.local, optionally a frame cut
off in the middle, as the soak's disconnecting client sends), closes them all, waits 3 s for
jemalloc to return what was freed, and prints the process's anonymous memory after each round.
A leak per connection grows it round after round; memory an allocator keeps levels off.

    python3 tests/soak/conn_cycles.py HOST PORT PID ROUNDS PER_ROUND [truncate]

PID is autoprep's (its /proc/PID/status is read). Raw protocol v4 frames, no driver.
"""
import socket
import sys
import time

from drift import anon_kib
from faults import frame, query, recv_frame, string_map

ONE = 0x0001


def main():
    host, port, pid = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    rounds, per = int(sys.argv[4]), int(sys.argv[5])
    truncate = len(sys.argv) > 6 and sys.argv[6] == "truncate"
    print(f"start: anonymous {anon_kib(pid)} KiB", flush=True)
    for r in range(rounds):
        socks = []
        for _ in range(per):
            s = socket.create_connection((host, port))
            s.sendall(frame(0, 0x01, string_map({"CQL_VERSION": "3.0.0"})))
            assert recv_frame(s)[0] == 0x02, "READY"
            select = query("SELECT key FROM system.local WHERE key = 'local'", ONE)
            s.sendall(frame(1, 0x07, select))
            assert recv_frame(s)[0] == 0x08, "RESULT"
            if truncate:
                cut = frame(2, 0x07, query("SELECT key FROM system.local WHERE key = 'x'", ONE))
                s.sendall(cut[:20])
            socks.append(s)
        for s in socks:
            s.close()
        time.sleep(3)
        print(f"round {r + 1}: anonymous {anon_kib(pid)} KiB", flush=True)


if __name__ == "__main__":
    main()
