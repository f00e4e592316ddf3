#!/usr/bin/env bash
# The image without Docker: builds autoprep with deploy/Dockerfile's own cargo command (static,
# musl) and runs it the way the image runs it — alone in an otherwise empty root directory, as
# UID/GID 65532, with nothing in its environment but the image's variables — against the local
# Cassandra: it must be a static executable, resolve `localhost` through /etc/hosts (which a
# container runtime provides), answer /live and /ready, and carry CQL, rewriting a literal INSERT.
#
# Needs root (chroot) and a Cassandra on 127.0.0.1:9042 (scripts/cassandra.sh start). Not part
# of scripts/test.sh: the release build takes minutes on two cores. Run it after changing the
# Dockerfile, the dependencies or the binary's start-up.
set -euo pipefail
REPO_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$REPO_DIR"

TARGET=x86_64-unknown-linux-musl
UPSTREAM_PORT="${CASSANDRA_NATIVE_PORT:-9042}"
die() { printf 'image-smoke: %s\n' "$*" >&2; exit 1; }
[[ $EUID -eq 0 ]] || die "needs root (chroot, a numeric user)"

echo "--> toolchain: the musl target and musl-gcc, as in the Dockerfile's builder"
rustup target list --installed | grep -qx "$TARGET" || rustup target add "$TARGET"
command -v musl-gcc >/dev/null || { apt-get update -qq && apt-get install -y -qq --no-install-recommends musl-tools; }

root="$(mktemp -d)"
context="$(mktemp -d)"
pid=""
cleanup() {
    [[ -n "$pid" ]] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null
    rm -rf "$root" "$context"
}
trap cleanup EXIT

# The build context the Dockerfile sees: the work tree less what .dockerignore names (its
# patterns here are paths and **/ prefixes; anything else is refused rather than guessed).
python3 - "$REPO_DIR" "$context" <<'PY'
import fnmatch, os, shutil, sys
src, dst = sys.argv[1:]
patterns = []
for line in open(os.path.join(src, ".dockerignore")):
    line = line.strip()
    if not line or line.startswith("#"):
        continue
    if line.startswith("!") or "[" in line:
        sys.exit(f".dockerignore: {line!r} is beyond what this script emulates")
    patterns.append(line)

def ignored(rel):
    for p in patterns:
        if p.startswith("**/"):
            if fnmatch.fnmatchcase(rel.rsplit("/", 1)[-1], p[3:]) or fnmatch.fnmatchcase(rel, p[3:]):
                return True
        elif fnmatch.fnmatchcase(rel, p):
            return True
    return False

for dirpath, dirnames, filenames in os.walk(src):
    rel_dir = os.path.relpath(dirpath, src)
    rel_dir = "" if rel_dir == "." else rel_dir + "/"
    dirnames[:] = [d for d in dirnames if not ignored(rel_dir + d)]
    for f in filenames:
        if not ignored(rel_dir + f):
            os.makedirs(os.path.join(dst, rel_dir), exist_ok=True)
            # New modification times: cargo sees the context's sources as changed and compiles the
            # workspace's crates from them.
            shutil.copy(os.path.join(dirpath, f), os.path.join(dst, rel_dir, f))
PY
echo "--> build context: $(find "$context" -type f | wc -l) files, $(du -sh "$context" | cut -f1) (the work tree less .dockerignore)"

# In that context, as the Dockerfile's RUN does. The target directory is the repository's (the
# Dockerfile's is a cache mount), so only the workspace's own crates compile again.
echo "--> cargo build --release --locked -p autoprep --target $TARGET"
t0=$SECONDS
(cd "$context" && CARGO_TARGET_DIR="$REPO_DIR/target" cargo build --release --locked -p autoprep --target "$TARGET")
echo "    built in $((SECONDS - t0)) s"
install -D -s -m 0755 "target/$TARGET/release/autoprep" "$root/usr/local/bin/autoprep"
if readelf -l "$root/usr/local/bin/autoprep" | grep -q 'program interpreter'; then
    die "the binary asks for a dynamic loader: not static"
fi
if readelf -d "$root/usr/local/bin/autoprep" | grep -q NEEDED; then
    die "the binary needs shared libraries"
fi
echo "    static executable, $(stat -c %s "$root/usr/local/bin/autoprep") bytes stripped"
mkdir -p "$root/etc"
printf '127.0.0.1\tlocalhost\n' >"$root/etc/hosts"
# Readable and searchable by the unprivileged user (mktemp made it 0700), writable by nobody.
chmod -R a+rX,a-w "$root"

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
cql_port="$(free_port)"
admin_port="$(free_port)"
echo "--> running as 65532:65532 in an empty root (listen 127.0.0.1:$cql_port, admin :$admin_port)"
# The image's defaults bind 0.0.0.0:9042 and :9100 in the container's own network namespace;
# here the host's is shared, so loopback ports that are free.
chroot_bin="$(command -v chroot)"
env -i NO_COLOR=1 AUTOPREP_LISTEN="127.0.0.1:$cql_port" AUTOPREP_ADMIN="127.0.0.1:$admin_port" \
    AUTOPREP_UPSTREAM="localhost:$UPSTREAM_PORT" \
    "$chroot_bin" --userspec=65532:65532 "$root" /usr/local/bin/autoprep &
pid=$!

python3 - "$cql_port" "$admin_port" "$pid" <<'EOF'
import socket, struct, sys, time, urllib.error, urllib.request
cql_port, admin_port, pid = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
admin = f"http://127.0.0.1:{admin_port}"

def get(path):
    try:
        with urllib.request.urlopen(admin + path, timeout=5) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()
    except OSError:
        return None, ""

def wait_for(path, what):
    for _ in range(300):
        status, body = get(path)
        if status == 200:
            return body
        time.sleep(0.1)
    sys.exit(f"{path} never answered 200 ({what}): {status} {body}")

wait_for("/live", "the process runs")
wait_for("/ready", "the upstream, reached as localhost, answers")
uid = next(l.split()[1] for l in open(f"/proc/{pid}/status") if l.startswith("Uid:"))
assert uid == "65532", f"running as uid {uid}"
print("    /live and /ready 200; running as uid", uid)

def frame(stream, opcode, body):
    return struct.pack(">BBhBi", 4, 0, stream, opcode, len(body)) + body

def string(s):
    b = s.encode()
    return struct.pack(">H", len(b)) + b

def read_frame(sock):
    head = b""
    while len(head) < 9:
        chunk = sock.recv(9 - len(head))
        if not chunk:
            sys.exit("connection closed")
        head += chunk
    _, _, stream, opcode, length = struct.unpack(">BBhBi", head)
    body = b""
    while len(body) < length:
        body += sock.recv(length - len(body))
    return opcode, body

sock = socket.create_connection(("127.0.0.1", cql_port), timeout=30)
sock.sendall(frame(1, 0x01, struct.pack(">H", 1) + string("CQL_VERSION") + string("3.0.0")))
opcode, body = read_frame(sock)
assert opcode == 0x02, f"STARTUP answered with opcode {opcode}: {body!r}"

def query(text, stream=2):
    b = text.encode()
    sock.sendall(frame(stream, 0x07, struct.pack(">i", len(b)) + b + struct.pack(">HB", 0x0001, 0)))
    opcode, body = read_frame(sock)
    if opcode != 0x08:
        sys.exit(f"{text!r}: opcode {opcode} {body!r}")
    return body

query("CREATE KEYSPACE IF NOT EXISTS deploy_smoke WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}")
query("CREATE TABLE IF NOT EXISTS deploy_smoke.kv (k int PRIMARY KEY, v text)")
for i in range(20):
    query(f"INSERT INTO deploy_smoke.kv (k, v) VALUES ({i}, 'value {i}')")
body = query("SELECT v FROM deploy_smoke.kv WHERE k = 7")
assert b"value 7" in body, body
_, metrics = get("/metrics")
line = next(l for l in metrics.splitlines() if l.startswith('autoprep_queries_total{outcome="rewritten"'))
rewritten = int(line.rsplit(" ", 1)[1])
assert rewritten > 0, metrics
print(f"    CQL through it: 20 literal INSERTs and a SELECT; {rewritten} rewritten into EXECUTEs")
EOF
echo "--> the image's binary works as the image runs it"
