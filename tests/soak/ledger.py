"""The soak's ledger: every row write a client sent, with whether it was acknowledged, and the
check that what the cluster holds at the end is what the acknowledged writes left.

A ledger is a set of JSON-lines files (one per client thread, `ledger-*.jsonl`), one line per
row a statement wrote, in the order the thread sent them:

    {"tb": "kv", "k": "p0t1-42", "s": "ack", "op": "ins", "row": {"v": "...", "n": 3},
     "kind": "text-insert", "at": 1764300000.123}

  tb, k   the table and the row's key (primary key values joined by "|")
  s       "ack": the client saw the write succeed (an LWT: applied); "unk": the request failed
          or timed out, so it may or may not have been applied
  op      "ins" / "upd": the listed columns take these values (an INSERT, an UPDATE, an LWT
          that applied); "del": the row is deleted (row null)
  kind    the workload's statement kind; at: the client's wall clock when it got the answer

Each key is written by one thread only, and a thread stops touching a key after a write with an
unknown outcome, so a key's history is acknowledged writes, then at most one unknown. The
check allows for unknowns anyway (each may or may not have applied, in order): the row read back
must be one of the states the history can leave. Writes are ordered by the driver's client
timestamps (monotonic per process), LWT keys by Paxos, so the last write applied wins.

    led = Ledger.load(run_dir)
    result = led.check(lambda table: {key: row_or_None, ...})   # the rows read at ALL
    result.acknowledged, result.lost, result.keys_checked, result.samples
"""

import dataclasses
import glob
import json
import os

MAX_UNKNOWN_BRANCHES = 10  # 2^10 possible states at most per key; beyond, later unknowns fold


@dataclasses.dataclass
class CheckResult:
    acknowledged: int = 0      # ledger lines with s = ack (row writes the client saw succeed)
    statements: int = 0        # distinct acknowledged statements (a batch of 3 rows counts 1)
    unknown: int = 0           # ledger lines with s = unk
    keys_checked: int = 0      # keys with at least one acknowledged write
    lost: int = 0              # of those, keys whose row is none of the states allowed
    samples: list = dataclasses.field(default_factory=list)   # up to 20 lost keys, described

    def to_json(self):
        return dataclasses.asdict(self)


def apply(state, event):
    """The row after one write: None is no row; a dict maps columns to values."""
    if event["op"] == "del":
        return None
    merged = dict(state or {})
    merged.update(event["row"])
    return merged


def possible_states(events):
    """Every state the key can be in after its writes, each acknowledged one applied and each
    unknown one applied or not (deduplicated, in no particular order)."""
    states = [None]
    branches = 0
    for ev in events:
        if ev["s"] == "ack":
            states = [apply(s, ev) for s in states]
        else:
            branches += 1
            applied = [apply(s, ev) for s in states]
            states = states + applied if branches <= MAX_UNKNOWN_BRANCHES else applied + states
        unique = {}
        for s in states:
            unique[json.dumps(s, sort_keys=True)] = s
        states = list(unique.values())[: 1 << MAX_UNKNOWN_BRANCHES]
    return states


def matches(state, actual):
    """Whether the row read back is that state: no row for None, else every column the writes
    set has the value written (columns nobody wrote are not compared)."""
    if state is None:
        return actual is None
    if actual is None:
        return False
    return all(actual.get(c) == v for c, v in state.items())


class Ledger:
    def __init__(self, events_by_key):
        # (table, key) -> [event, ...] in send order
        self.events = events_by_key

    @classmethod
    def load(cls, run_dir):
        by_key = {}
        for path in sorted(glob.glob(os.path.join(run_dir, "ledger-*.jsonl"))):
            with open(path, encoding="utf-8") as f:
                for line in f:
                    line = line.strip()
                    if not line:
                        continue
                    ev = json.loads(line)
                    by_key.setdefault((ev["tb"], ev["k"]), []).append(ev)
        return cls(by_key)

    def tables(self):
        return sorted({tb for tb, _ in self.events})

    def check(self, read_table):
        """Compares the ledger with the rows `read_table(table)` returns ({key: row dict or
        None}); a key missing from that map is a row that is not there."""
        result = CheckResult()
        rows = {tb: read_table(tb) for tb in self.tables()}
        stmts = set()
        for (tb, key), events in self.events.items():
            acked = [e for e in events if e["s"] == "ack"]
            result.acknowledged += len(acked)
            result.unknown += len(events) - len(acked)
            stmts.update(e.get("stmt") for e in acked)
            if not acked:
                continue
            result.keys_checked += 1
            actual = rows[tb].get(key)
            states = possible_states(events)
            if any(matches(s, actual) for s in states):
                continue
            result.lost += 1
            if len(result.samples) < 20:
                result.samples.append({
                    "table": tb, "key": key, "read": actual, "allowed": states[:4],
                    "history": [{k: e.get(k) for k in ("s", "op", "row", "kind", "at")}
                                for e in events[-6:]]})
        stmts.discard(None)
        result.statements = len(stmts)
        return result
