{{/*
The sidecar as named templates, for this chart's example and for any application chart that
depends on this one. Every template takes one dict:

  values  the autoprep values (this chart's .Values, or a parent's .Values.autoprep)
  name    the application's name: the ConfigMap is "<name>-autoprep"

In an application chart (Chart.yaml dependency `autoprep`, values under `autoprep:` with
`example.enabled: false`):

  {{- $ap := dict "values" .Values.autoprep "name" "my-app" }}
  metadata:
    annotations:
      {{- include "autoprep.podAnnotations" $ap | nindent 8 }}
  spec:
    terminationGracePeriodSeconds: {{ include "autoprep.terminationGracePeriodSeconds" (merge (dict "appShutdownSeconds" 15) $ap) }}
    initContainers:          # `containers` when values.nativeSidecar is false
      {{- include "autoprep.sidecar" $ap | nindent 6 }}
    volumes:
      {{- include "autoprep.volumes" $ap | nindent 6 }}

and, once per application, {{ include "autoprep.configMap" $ap }} as a resource of its own.
*/}}

{{/* The image reference: repository@digest, or repository:tag. */}}
{{- define "autoprep.image" -}}
{{- $img := .values.image -}}
{{- if $img.digest -}}
{{ $img.repository }}@{{ $img.digest }}
{{- else -}}
{{ $img.repository }}:{{ required "autoprep: image.tag or image.digest is required" $img.tag }}
{{- end -}}
{{- end -}}

{{/* Name of the ConfigMap that holds autoprep.toml. */}}
{{- define "autoprep.configMapName" -}}
{{ printf "%s-autoprep" .name | trunc 63 | trimSuffix "-" }}
{{- end -}}

{{/* Whether the TOML file exists (values.config not empty). */}}
{{- define "autoprep.hasConfig" -}}
{{- if .values.config }}true{{ end -}}
{{- end -}}

{{/*
One TOML value. Helm reads every YAML number as a float, and its toToml writes 10000 as
10000.0, which an integer option rejects: whole numbers are written as integers here.
*/}}
{{- define "autoprep.tomlValue" -}}
{{- if kindIs "float64" . -}}
{{- if eq . (float64 (int64 .)) }}{{ int64 . }}{{ else }}{{ . }}{{ end -}}
{{- else if or (kindIs "int" .) (kindIs "int64" .) (kindIs "bool" .) -}}
{{ . }}
{{- else if kindIs "string" . -}}
{{ toJson . }}
{{- else if kindIs "slice" . -}}
[{{ range $i, $e := . }}{{ if $i }}, {{ end }}{{ include "autoprep.tomlValue" $e }}{{ end }}]
{{- else -}}
{{ fail (printf "autoprep: config: cannot write %v (%s) as a TOML value" . (kindOf .)) }}
{{- end -}}
{{- end -}}

{{/*
values.config as TOML: top-level keys first, then one [table] per map (one level deep). A
null value leaves its key out.
*/}}
{{- define "autoprep.toml" -}}
{{- range $k, $v := . }}
{{- if and (not (kindIs "map" $v)) (not (kindIs "invalid" $v)) }}
{{ $k }} = {{ include "autoprep.tomlValue" $v }}
{{- end }}
{{- end }}
{{- range $k, $v := . }}
{{- if kindIs "map" $v }}
[{{ $k }}]
{{- range $k2, $v2 := $v }}
{{- if kindIs "map" $v2 }}
{{- fail (printf "autoprep: config.%s.%s: tables nest one level deep" $k $k2) }}
{{- else if not (kindIs "invalid" $v2) }}
{{ $k2 }} = {{ include "autoprep.tomlValue" $v2 }}
{{- end }}
{{- end }}
{{- end }}
{{- end }}
{{- end -}}

{{/* The ConfigMap with autoprep.toml; renders nothing when values.config is empty. */}}
{{- define "autoprep.configMap" -}}
{{- if include "autoprep.hasConfig" . }}
apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ include "autoprep.configMapName" . }}
  labels:
    app.kubernetes.io/name: {{ .name }}
    app.kubernetes.io/component: autoprep
data:
  autoprep.toml: |
    {{- include "autoprep.toml" .values.config | trim | nindent 4 }}
{{- end }}
{{- end -}}

{{/*
Pod annotations: Prometheus scrape hints for the admin port, and a checksum of the TOML
configuration so that a change of it rolls the pods.
*/}}
{{- define "autoprep.podAnnotations" -}}
{{- if .values.metrics.podAnnotations }}
prometheus.io/scrape: "true"
prometheus.io/port: {{ .values.adminPort | quote }}
prometheus.io/path: /metrics
{{- end }}
{{- if include "autoprep.hasConfig" . }}
checksum/autoprep-config: {{ include "autoprep.toml" .values.config | sha256sum }}
{{- end }}
{{- end -}}

{{/*
terminationGracePeriodSeconds for a pod with the sidecar: the application's own shutdown time
(appShutdownSeconds in the dict), then autoprep's drain grace, then a 10 s margin. With a native
sidecar the kubelet stops the application first and autoprep after it, within this one budget.
*/}}
{{- define "autoprep.terminationGracePeriodSeconds" -}}
{{ add (int (default 0 .appShutdownSeconds)) (int .values.drainGraceSeconds) 10 }}
{{- end -}}

{{/* The sidecar container, as one item of a container list. */}}
{{- define "autoprep.sidecar" -}}
{{- $v := .values -}}
- name: autoprep
  image: {{ include "autoprep.image" . }}
  imagePullPolicy: {{ $v.image.pullPolicy }}
  {{- if $v.nativeSidecar }}
  # Native sidecar: an init container that runs for the pod's whole life.
  restartPolicy: Always
  {{- end }}
  env:
    - name: AUTOPREP_LISTEN
      value: {{ $v.listen | quote }}
    - name: AUTOPREP_UPSTREAM
      value: {{ required "autoprep: upstream (host:port) is required" $v.upstream | quote }}
    - name: AUTOPREP_ADMIN
      value: {{ printf "0.0.0.0:%d" (int $v.adminPort) | quote }}
    - name: AUTOPREP_DRAIN_GRACE_SECONDS
      value: {{ $v.drainGraceSeconds | quote }}
    {{- if include "autoprep.hasConfig" . }}
    - name: AUTOPREP_CONFIG
      value: /etc/autoprep/config/autoprep.toml
    {{- end }}
    {{- if $v.tls.clientSecret }}
    - name: AUTOPREP_TLS_CERT
      value: /etc/autoprep/tls/client/tls.crt
    - name: AUTOPREP_TLS_KEY
      value: /etc/autoprep/tls/client/tls.key
    {{- if $v.tls.verifyClients }}
    - name: AUTOPREP_TLS_CLIENT_CA
      value: /etc/autoprep/tls/client/ca.crt
    {{- end }}
    {{- end }}
    {{- if $v.tls.upstreamSecret }}
    - name: AUTOPREP_UPSTREAM_TLS
      value: "true"
    - name: AUTOPREP_UPSTREAM_TLS_CA
      value: /etc/autoprep/tls/upstream/ca.crt
    {{- if $v.tls.upstreamClientCertificate }}
    - name: AUTOPREP_UPSTREAM_TLS_CERT
      value: /etc/autoprep/tls/upstream/tls.crt
    - name: AUTOPREP_UPSTREAM_TLS_KEY
      value: /etc/autoprep/tls/upstream/tls.key
    {{- end }}
    {{- end }}
    {{- if or $v.tls.clientSecret $v.tls.upstreamSecret }}
    # A renewed certificate is used for new connections within this many seconds.
    - name: AUTOPREP_TLS_RELOAD_INTERVAL_SECONDS
      value: {{ $v.tls.reloadIntervalSeconds | quote }}
    {{- end }}
    {{- if and $v.logFormat (ne $v.logFormat "text") }}
    - name: AUTOPREP_LOG_FORMAT
      value: {{ $v.logFormat | quote }}
    {{- end }}
    {{- with $v.tracing }}
    {{- if .endpoint }}
    # OpenTelemetry request spans (values: tracing).
    - name: HOST_IP
      valueFrom:
        fieldRef:
          fieldPath: status.hostIP
    - name: OTEL_EXPORTER_OTLP_ENDPOINT
      value: {{ .endpoint | quote }}
    - name: OTEL_EXPORTER_OTLP_PROTOCOL
      value: {{ .protocol | quote }}
    - name: OTEL_TRACES_SAMPLER
      value: parentbased_traceidratio
    - name: OTEL_TRACES_SAMPLER_ARG
      value: {{ .sampleRatio | quote }}
    - name: AUTOPREP_TRACING_SLOW_MS
      value: {{ .slowMs | quote }}
    {{- with .serviceName }}
    - name: OTEL_SERVICE_NAME
      value: {{ . | quote }}
    {{- end }}
    {{- with .resourceAttributes }}
    - name: OTEL_RESOURCE_ATTRIBUTES
      value: {{ . | quote }}
    {{- end }}
    {{- end }}
    {{- end }}
    {{- with $v.extraEnv }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
  ports:
    - name: autoprep-admin
      containerPort: {{ $v.adminPort }}
      protocol: TCP
  startupProbe:
    httpGet:
      path: /live
      port: autoprep-admin
    {{- toYaml $v.probes.startup | nindent 4 }}
  livenessProbe:
    httpGet:
      path: /live
      port: autoprep-admin
    {{- toYaml $v.probes.liveness | nindent 4 }}
  readinessProbe:
    httpGet:
      path: /ready
      port: autoprep-admin
    {{- toYaml $v.probes.readiness | nindent 4 }}
  resources:
    {{- toYaml $v.resources | nindent 4 }}
  securityContext:
    {{- toYaml $v.securityContext | nindent 4 }}
  {{- if or (include "autoprep.hasConfig" .) $v.tls.clientSecret $v.tls.upstreamSecret }}
  volumeMounts:
    {{- if include "autoprep.hasConfig" . }}
    - name: autoprep-config
      mountPath: /etc/autoprep/config
      readOnly: true
    {{- end }}
    {{- /* Directories, never subPath: a subPath mount is not updated when its Secret is. */}}
    {{- if $v.tls.clientSecret }}
    - name: autoprep-tls-client
      mountPath: /etc/autoprep/tls/client
      readOnly: true
    {{- end }}
    {{- if $v.tls.upstreamSecret }}
    - name: autoprep-tls-upstream
      mountPath: /etc/autoprep/tls/upstream
      readOnly: true
    {{- end }}
  {{- end }}
{{- end -}}

{{/* The sidecar's volumes, as items of the pod's volume list (may be none). */}}
{{- define "autoprep.volumes" -}}
{{- if include "autoprep.hasConfig" . }}
- name: autoprep-config
  configMap:
    name: {{ include "autoprep.configMapName" . }}
{{- end }}
{{- if .values.tls.clientSecret }}
- name: autoprep-tls-client
  secret:
    secretName: {{ .values.tls.clientSecret }}
{{- end }}
{{- if .values.tls.upstreamSecret }}
- name: autoprep-tls-upstream
  secret:
    secretName: {{ .values.tls.upstreamSecret }}
{{- end }}
{{- end -}}
