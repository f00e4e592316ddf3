"""autoprep's footprint over the soak: RSS and open file descriptors sampled every few seconds
from /proc, and their drift.

Drift, precisely (drift()):
  * Only samples of the last three quarters of the run: t >= start + (end - start) / 4.
  * Split by process: a restart of autoprep (the drain in the schedule) starts a new process
    whose RSS and descriptors start afresh, so each process is a segment of its own. A segment
    starts `settle` seconds after its process became the only one serving: the first at its
    start, a restarted one when the draining process exited (it keeps the clients' connections
    for its grace period and closes them then; only then do they reconnect to the new one),
    so that its client connections and the per-node connections it opens on demand are made.
    Nothing is compared across segments.
  * Only steady samples: taken while every node was up and not paused and the last fault action
    (a node killed, paused, resumed or started) had ended at least `settle` seconds before. A
    node down closes the client connections homed on it and the replica connections to it (they
    are made again when it is back): fewer descriptors then is the design, not a leak. The run
    over all samples is reported beside it.
  * Like with like: of a segment's steady samples, only those whose process held the segment's
    most common number of established TCP connections (client and upstream: /proc/PID/fd
    against /proc/PID/net/tcp). How many connections a process holds follows from where its
    clients are homed and which replicas they have routed to, which every node kill and restart
    reshuffles; each connection costs descriptors and buffers. A leak grows RSS or descriptors
    at an equal number of connections (a leaked socket whose peer closed is in CLOSE_WAIT: not
    established, so it counts as growth).
  * Each segment is cut into windows of `window` seconds from its start; a window's value is the
    median of those samples (a window with fewer than 3 is left out).
  * drift(segment) = (max - min) / mean of its window medians; drift = the largest over the
    segments (0 with fewer than two windows: reported as such, with the window count).
"""

import os
import statistics
import threading
import time

MIN_SAMPLES_PER_WINDOW = 3


TCP_STATES = {"01": "established", "02": "syn_sent", "03": "syn_recv", "04": "fin_wait1",
              "05": "fin_wait2", "06": "time_wait", "07": "close", "08": "close_wait",
              "09": "last_ack", "0A": "listen", "0B": "closing"}


def tcp_states(pid, inodes):
    """{state name: how many of these socket inodes are TCP sockets in it} (/proc/PID/net/tcp,
    the process's network namespace)."""
    states = {}
    for table in ("tcp", "tcp6"):
        try:
            with open(f"/proc/{pid}/net/{table}", encoding="ascii") as f:
                next(f, None)
                for line in f:
                    cols = line.split()
                    if len(cols) > 9 and cols[9] in inodes:
                        name = "tcp_" + TCP_STATES.get(cols[3], cols[3])
                        states[name] = states.get(name, 0) + 1
        except OSError:
            pass
    return states


def fd_kind(link):
    """What a descriptor is, from its /proc/PID/fd link: a TCP state is filled in later."""
    if link.startswith("socket:["):
        return "socket"
    if link.startswith("anon_inode:"):
        return link[len("anon_inode:"):].strip("[]")
    if link.startswith("pipe:"):
        return "pipe"
    return "file"


def memory_kib(pid):
    """{"VmRSS", "RssAnon", "RssFile"} of a process from /proc/PID/status, in KiB (those the
    kernel lists)."""
    with open(f"/proc/{pid}/status", encoding="ascii") as f:
        return {k: int(v.split()[0]) for k, _, v in (line.partition(":") for line in f)
                if k in ("VmRSS", "RssAnon", "RssFile")}


def anon_kib(pid):
    """A process's anonymous memory in KiB (the heap, stacks: where a leak shows)."""
    return memory_kib(pid)["RssAnon"]


def read_proc(pid):
    """(RSS in KiB, open descriptors, established TCP connections among them, {"rss_anon_kib",
    "rss_file_kib"}) of a process, or None when it is gone. RSS is the sum of anonymous
    memory (the heap, stacks: where a leak shows) and file pages (the binary's code and data,
    mapped in as code runs for the first time: bounded by the binary, not a leak); both are
    recorded so that a step can be told apart; and the descriptors by kind (TCP sockets by
    state, other sockets, epoll and event descriptors, pipes, files), so that a change in their
    number says what it was."""
    try:
        fields = memory_kib(pid)
        rss = fields["VmRSS"]
        split = {"rss_anon_kib": fields.get("RssAnon"), "rss_file_kib": fields.get("RssFile")}
        inodes = set()
        kinds = {}
        names = os.listdir(f"/proc/{pid}/fd")
        for name in names:
            try:
                link = os.readlink(f"/proc/{pid}/fd/{name}")
            except OSError:
                continue
            kind = fd_kind(link)
            if kind == "socket":
                inodes.add(link[8:-1])
            else:
                kinds[kind] = kinds.get(kind, 0) + 1
        states = tcp_states(pid, inodes)
        kinds.update(states)
        other = len(inodes) - sum(states.values())
        if other:
            kinds["socket_other"] = other
        return rss, len(names), states.get("tcp_established", 0), {**split, "fd_kinds": kinds}
    except (OSError, KeyError, ValueError):
        return None


class Sampler(threading.Thread):
    """Samples the process `current()` names (a pid or None) every `period` seconds until
    stopped, with `steady()`'s verdict; samples: [{t, pid, rss_kib, fds, steady}]."""

    def __init__(self, current, steady, period=2.0, max_samples=100_000):
        super().__init__(name="sampler", daemon=True)
        self.current, self.steady, self.period = current, steady, period
        self.max_samples = max_samples
        self.samples = []
        self.halt = threading.Event()

    def run(self):
        while not self.halt.is_set() and len(self.samples) < self.max_samples:
            pid = self.current()
            if pid is not None:
                got = read_proc(pid)
                if got is not None:
                    self.samples.append({"t": round(time.time(), 3), "pid": pid,
                                         "rss_kib": got[0], "fds": got[1], "conns": got[2],
                                         **got[3], "steady": bool(self.steady())})
            self.halt.wait(self.period)

    def stop(self):
        self.halt.set()
        self.join(10)


def _segment_drift(samples, seg_start, metric, window, steady_only):
    kept = [s for s in samples if s["t"] >= seg_start and (s["steady"] or not steady_only)]
    conns = None
    if steady_only and kept and "conns" in kept[0]:
        # Like with like: the samples with the segment's most common connection count.
        counts = {}
        for s in kept:
            counts[s["conns"]] = counts.get(s["conns"], 0) + 1
        conns = max(counts, key=lambda c: (counts[c], c))
        kept = [s for s in kept if s["conns"] == conns]
    windows = {}
    for s in kept:
        windows.setdefault(int((s["t"] - seg_start) // window), []).append(s)
    full = [v for _, v in sorted(windows.items()) if len(v) >= MIN_SAMPLES_PER_WINDOW]
    medians = [statistics.median(x[metric] for x in v) for v in full]
    if len(medians) < 2:
        return {"windows": len(medians), "medians": medians, "drift": 0.0, "conns": conns}
    mean = statistics.fmean(medians)
    out = {"windows": len(medians), "medians": medians, "conns": conns,
           "drift": (max(medians) - min(medians)) / mean if mean else 0.0}
    if metric == "fds" and "fd_kinds" in kept[0]:
        # What the descriptors were at the lowest and the highest window (its last sample).
        out["kinds_low"] = full[medians.index(min(medians))][-1]["fd_kinds"]
        out["kinds_high"] = full[medians.index(max(medians))][-1]["fd_kinds"]
    return out


def drift(samples, run_start, run_end, process_starts, window, settle, steady_only=True):
    """{metric: {"drift": largest over segments, "segments": [...]}} for rss_kib and fds (see
    the module doc). process_starts: {pid: the time it became the only process serving}."""
    first = run_start + (run_end - run_start) / 4
    by_pid = {}
    for s in samples:
        if first <= s["t"] <= run_end:
            by_pid.setdefault(s["pid"], []).append(s)
    out = {}
    for metric in ("rss_kib", "fds", "rss_anon_kib", "rss_file_kib"):
        if metric not in ("rss_kib", "fds") and not all(s.get(metric) is not None
                                                          for s in samples):
            continue
        segs = []
        for pid, ss in sorted(by_pid.items(), key=lambda kv: kv[1][0]["t"]):
            seg_start = max(first, process_starts.get(pid, run_start) + settle)
            seg = _segment_drift(ss, seg_start, metric, window, steady_only)
            seg.update(pid=pid, start=round(seg_start, 1))
            segs.append(seg)
        out[metric] = {"drift": max((s["drift"] for s in segs), default=0.0), "segments": segs}
    return out
