{{/* Names and labels. */}}
{{- define "tollgate.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "tollgate.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "tollgate.selectorLabels" -}}
app.kubernetes.io/name: {{ include "tollgate.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: gateway
{{- end -}}

{{- define "tollgate.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
app.kubernetes.io/name: {{ include "tollgate.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: tollgate
{{- end -}}

{{- define "tollgate.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "tollgate.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{- define "tollgate.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}

{{/* The workload kind: a StatefulSet when the spool is on a persistent volume per pod. */}}
{{- define "tollgate.workloadKind" -}}
{{- if .Values.callLog.spool.persistence.enabled -}}StatefulSet{{- else -}}Deployment{{- end -}}
{{- end -}}

{{/*
Seconds in a Go duration string ("10m", "1m30s", "90s"), rounded up; fails
on anything else. The gateway reads durations with time.ParseDuration.
*/}}
{{- define "tollgate.seconds" -}}
{{- $d := toString .d -}}
{{- if not (regexMatch "^([0-9]+(\\.[0-9]*)?(ns|us|µs|ms|s|m|h))+$" $d) -}}
{{- fail (printf "%s: %q is not a duration (e.g. 10m, 90s)" .at $d) -}}
{{- end -}}
{{- $unit := dict "h" 3600.0 "m" 60.0 "s" 1.0 "ms" 0.001 "us" 0.000001 "µs" 0.000001 "ns" 0.000000001 -}}
{{- $s := 0.0 -}}
{{- range regexFindAll "[0-9.]+(ns|us|µs|ms|s|m|h)" $d -1 -}}
{{- $n := regexFind "^[0-9.]+" . -}}
{{- $s = addf $s (mulf (float64 $n) (get $unit (trimPrefix $n .))) -}}
{{- end -}}
{{- ceil $s | int -}}
{{- end -}}

{{/*
The longest stream the policy allows, in seconds: the largest
policy.upstreams[].timeouts.total (the gateway's default is 10m).
*/}}
{{- define "tollgate.longestStreamSeconds" -}}
{{- $max := 0 -}}
{{- range $i, $u := .Values.policy.upstreams -}}
{{- $total := "10m" -}}
{{- with $u.timeouts }}{{ with .total }}{{ $total = . }}{{ end }}{{ end -}}
{{- $s := include "tollgate.seconds" (dict "d" $total "at" (printf "policy.upstreams[%d].timeouts.total" $i)) | int -}}
{{- if gt $s $max }}{{ $max = $s }}{{ end -}}
{{- end -}}
{{- $max -}}
{{- end -}}

{{/*
The drain (the policy's server.drain_timeout), in seconds: as long as the
longest stream, so a rolling deploy cuts none. drain.timeoutSeconds 0
follows the policy; a value below the longest stream fails the rendering.
*/}}
{{- define "tollgate.drainSeconds" -}}
{{- $longest := include "tollgate.longestStreamSeconds" . | int -}}
{{- $d := int .Values.drain.timeoutSeconds -}}
{{- if eq $d 0 -}}
{{- $longest -}}
{{- else if lt $d $longest -}}
{{- fail (printf "drain.timeoutSeconds (%d) is shorter than the longest stream the policy allows (%ds, the largest policy.upstreams[].timeouts.total): a rolling deploy would cut the streams that outlast the drain. Set drain.timeoutSeconds to 0 (follow the policy) or at least %d, or lower timeouts.total" $d $longest $longest) -}}
{{- else -}}
{{- $d -}}
{{- end -}}
{{- end -}}

{{/*
-shutdown-delay + the drain + the call log's last batch; an explicit
terminationGracePeriodSeconds below that fails the rendering (the kubelet
would SIGKILL the streams the drain waits for).
*/}}
{{- define "tollgate.terminationGracePeriodSeconds" -}}
{{- $need := add .Values.drain.shutdownDelaySeconds (include "tollgate.drainSeconds" . | int) .Values.drain.ledgerFlushSeconds -}}
{{- $g := int .Values.terminationGracePeriodSeconds -}}
{{- if eq $g 0 -}}
{{- $need -}}
{{- else if lt $g (int $need) -}}
{{- fail (printf "terminationGracePeriodSeconds (%d) is shorter than drain.shutdownDelaySeconds + the drain + drain.ledgerFlushSeconds (%d): the kubelet would SIGKILL the streams the drain waits for. Set it to 0 (computed) or at least %d" $g (int $need) (int $need)) -}}
{{- else -}}
{{- $g -}}
{{- end -}}
{{- end -}}

{{/* Paths inside the image (deploy/docker/Dockerfile). */}}
{{- define "tollgate.policyDir" -}}/etc/tollgate/policy{{- end -}}
{{- define "tollgate.spoolDir" -}}/var/lib/tollgate/spool{{- end -}}
{{- define "tollgate.cacheDir" -}}/var/cache/tollgate{{- end -}}
{{- define "tollgate.tlsDir" -}}/etc/tollgate/tls{{- end -}}

{{/*
The TLS Secrets the pods mount, as a YAML list of {volume, dir, secretName,
items, use}: dir under tollgate.tlsDir, items mapping the Secret's keys to
fixed file names, use "policy" (files the policy names, also read by
warm-plugins) or "postgres" (libpq variables, also read by the migration).
A combination the gateway would refuse, or that would silently not do what
it says, fails the rendering here.
*/}}
{{- define "tollgate.tlsSecrets" -}}
{{- $t := .Values.tls -}}
{{- $out := list -}}
{{- $pair := list (dict "key" "tls.crt" "path" "tls.crt") (dict "key" "tls.key" "path" "tls.key") -}}
{{- range $at, $l := dict "tls.server" $t.server "tls.admin" $t.admin -}}
{{- if $l.secretName -}}
{{- $v := toString $l.minVersion -}}
{{- if not (has $v (list "1.2" "1.3")) -}}
{{- fail (printf "%s.minVersion must be \"1.2\" or \"1.3\", got %q" $at $v) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- with $t.server.secretName -}}
{{- $out = append $out (dict "volume" "tls-server" "dir" "server" "secretName" . "items" $pair "use" "policy") -}}
{{- end -}}
{{- $auth := toString ($t.admin.clientAuth | default "none") -}}
{{- if not (has $auth (list "none" "request" "require")) -}}
{{- fail (printf "tls.admin.clientAuth must be none, request or require, got %q" $auth) -}}
{{- end -}}
{{- if $t.admin.secretName -}}
{{- if not .Values.admin.enabled -}}
{{- fail "tls.admin.secretName is set but admin.enabled is false: there is no admin listener to serve over TLS" -}}
{{- end -}}
{{- $out = append $out (dict "volume" "tls-admin" "dir" "admin" "secretName" $t.admin.secretName "items" $pair "use" "policy") -}}
{{- else if $t.admin.clientCA.secretName -}}
{{- fail "tls.admin.clientCA.secretName needs tls.admin.secretName: client certificates are asked for in the TLS handshake, and the admin listener is plain HTTP without it" -}}
{{- else if ne $auth "none" -}}
{{- fail (printf "tls.admin.clientAuth %s needs tls.admin.secretName (the admin listener on TLS) and tls.admin.clientCA.secretName" $auth) -}}
{{- end -}}
{{- if $t.admin.clientCA.secretName -}}
{{- if eq $auth "none" -}}
{{- fail "tls.admin.clientCA.secretName is set but tls.admin.clientAuth is none: set clientAuth to request or require, or drop the CA" -}}
{{- end -}}
{{- $out = append $out (dict "volume" "tls-admin-client-ca" "dir" "admin-client-ca" "secretName" $t.admin.clientCA.secretName "items" (list (dict "key" (required "tls.admin.clientCA.key" $t.admin.clientCA.key) "path" "ca.crt")) "use" "policy") -}}
{{- else if ne $auth "none" -}}
{{- fail (printf "tls.admin.clientAuth %s needs tls.admin.clientCA.secretName (the CAs client certificates are verified against)" $auth) -}}
{{- end -}}
{{- $r := .Values.redis.tls -}}
{{- if $r.enabled -}}
{{- with $r.ca.secretName -}}
{{- $out = append $out (dict "volume" "tls-redis-ca" "dir" "redis-ca" "secretName" . "items" (list (dict "key" (required "redis.tls.ca.key" $r.ca.key) "path" "ca.crt")) "use" "policy") -}}
{{- end -}}
{{- with $r.clientCert.secretName -}}
{{- $out = append $out (dict "volume" "tls-redis-client" "dir" "redis-client" "secretName" . "items" $pair "use" "policy") -}}
{{- end -}}
{{- else if or $r.ca.secretName $r.clientCert.secretName $r.serverName -}}
{{- fail "redis.tls.ca, redis.tls.clientCert and redis.tls.serverName need redis.tls.enabled: without it the gateway connects to Redis in plain TCP" -}}
{{- end -}}
{{- $pg := .Values.postgres -}}
{{- $mode := toString ($pg.sslMode | default "") -}}
{{- if and $mode (not (has $mode (list "disable" "allow" "prefer" "require" "verify-ca" "verify-full"))) -}}
{{- fail (printf "postgres.sslMode must be disable, allow, prefer, require, verify-ca or verify-full, got %q" $mode) -}}
{{- end -}}
{{- if $pg.ca.secretName -}}
{{- if not (has $mode (list "require" "verify-ca" "verify-full")) -}}
{{- fail (printf "postgres.ca.secretName needs postgres.sslMode verify-full (or verify-ca, require), got %q: with another mode the CA is not used to verify Postgres" $mode) -}}
{{- end -}}
{{- $out = append $out (dict "volume" "tls-postgres-ca" "dir" "postgres-ca" "secretName" $pg.ca.secretName "items" (list (dict "key" (required "postgres.ca.key" $pg.ca.key) "path" "ca.crt")) "use" "postgres") -}}
{{- end -}}
{{- if $pg.clientCert.secretName -}}
{{- if eq $mode "disable" -}}
{{- fail "postgres.clientCert.secretName with postgres.sslMode disable: a client certificate needs TLS" -}}
{{- end -}}
{{- $out = append $out (dict "volume" "tls-postgres-client" "dir" "postgres-client" "secretName" $pg.clientCert.secretName "items" $pair "use" "postgres") -}}
{{- end -}}
{{- toYaml $out -}}
{{- end -}}

{{/* The TLS Secrets' volumeMounts ("use": policy, postgres or all). */}}
{{- define "tollgate.tlsMounts" -}}
{{- range (include "tollgate.tlsSecrets" .ctx | fromYamlArray) }}
{{- if or (eq $.use "all") (eq $.use .use) }}
- name: {{ .volume }}
  mountPath: {{ include "tollgate.tlsDir" $.ctx }}/{{ .dir }}
  readOnly: true
{{- end }}
{{- end }}
{{- end -}}

{{/*
The TLS Secrets' volumes. Whole Secrets as directories: the kubelet
updates them in place (a subPath mount would never see a renewal). 0440
with the pod's fsGroup: readable by the gateway's group only.
*/}}
{{- define "tollgate.tlsVolumes" -}}
{{- range (include "tollgate.tlsSecrets" .ctx | fromYamlArray) }}
{{- if or (eq $.use "all") (eq $.use .use) }}
- name: {{ .volume }}
  secret:
    secretName: {{ .secretName }}
    defaultMode: 0440
    items:
      {{- range .items }}
      - key: {{ .key }}
        path: {{ .path }}
      {{- end }}
{{- end }}
{{- end }}
{{- end -}}

{{/* The probes' scheme: HTTPS when the public listener serves TLS. */}}
{{- define "tollgate.probeScheme" -}}
{{- if .Values.tls.server.secretName }}HTTPS{{ else }}HTTP{{ end -}}
{{- end -}}

{{/*
The policy (docs/POLICY.md): .Values.policy plus what the chart owns. Plugin
paths keep ${TOLLGATE_PLUGIN_DIR:-...} so the rendered file validates
unchanged outside the image (tools/deploycheck sets the variable).
*/}}
{{- define "tollgate.policy" -}}
{{- $p := .Values.policy -}}
{{- $server := deepCopy ($p.server | default dict) -}}
{{- $_ := set $server "listen" (printf "0.0.0.0:%d" (int .Values.ports.http)) -}}
{{- $_ := set $server "drain_timeout" (printf "%ss" (include "tollgate.drainSeconds" .)) -}}
{{- $_ := include "tollgate.tlsSecrets" . -}}
{{- if hasKey $server "tls" -}}
{{- fail "policy.server.tls: set tls.server.secretName instead (the chart mounts the Secret and writes the paths)" -}}
{{- end -}}
{{- $tlsDir := printf "${TOLLGATE_TLS_DIR:-%s}" (include "tollgate.tlsDir" .) -}}
{{- with .Values.tls.server.secretName -}}
{{- $_ := set $server "tls" (dict "cert_file" (printf "%s/server/tls.crt" $tlsDir) "key_file" (printf "%s/server/tls.key" $tlsDir) "min_version" (toString $.Values.tls.server.minVersion)) -}}
{{- end -}}
{{- $store := deepCopy ($p.store | default dict) -}}
{{- $_ := set $store "kind" "postgres" -}}
{{- $redis := dict "addrs" (required "redis.addrs: at least one Redis address is required" .Values.redis.addrs) "timeout" .Values.redis.timeout -}}
{{- with .Values.redis.username }}{{ $_ := set $redis "username" . }}{{ end -}}
{{- if .Values.secrets.redisPassword.existingSecret }}{{ $_ := set $redis "password_env" "TOLLGATE_REDIS_PASSWORD" }}{{ end -}}
{{- if .Values.redis.tls.enabled -}}
{{- $rt := dict -}}
{{- with .Values.redis.tls.serverName }}{{ $_ := set $rt "server_name" . }}{{ end -}}
{{- if .Values.redis.tls.ca.secretName }}{{ $_ := set $rt "ca_file" (printf "%s/redis-ca/ca.crt" $tlsDir) }}{{ end -}}
{{- if .Values.redis.tls.clientCert.secretName -}}
{{- $_ := set $rt "cert_file" (printf "%s/redis-client/tls.crt" $tlsDir) -}}
{{- $_ := set $rt "key_file" (printf "%s/redis-client/tls.key" $tlsDir) -}}
{{- end -}}
{{- $_ := set $redis "tls" $rt -}}
{{- end -}}
{{- $callLog := deepCopy ($p.call_log | default dict) -}}
{{- $_ := set $callLog "spool_dir" (include "tollgate.spoolDir" .) -}}
{{- $plugins := list -}}
{{- range $p.plugins -}}
{{- $pl := omit . "module" -}}
{{- $_ := set $pl "path" (printf "${TOLLGATE_PLUGIN_DIR:-/etc/tollgate/plugins}/%s.wasm" (default .name .module)) -}}
{{- $plugins = append $plugins $pl -}}
{{- end -}}
{{- $policy := dict "version" 1 "server" $server "upstreams" $p.upstreams "routes" $p.routes "store" $store "redis" $redis "call_log" $callLog "plugin_runtime" (dict "cache_dir" (printf "%s/wazero" (include "tollgate.cacheDir" .))) "plugins" $plugins -}}
{{- if .Values.admin.enabled -}}
{{- $admin := dict "listen" (printf "0.0.0.0:%d" (int .Values.ports.admin)) -}}
{{- with .Values.tls.admin -}}
{{- if .secretName -}}
{{- $at := dict "cert_file" (printf "%s/admin/tls.crt" $tlsDir) "key_file" (printf "%s/admin/tls.key" $tlsDir) "min_version" (toString .minVersion) "client_auth" (.clientAuth | default "none") -}}
{{- if .clientCA.secretName }}{{ $_ := set $at "client_ca_file" (printf "%s/admin-client-ca/ca.crt" $tlsDir) }}{{ end -}}
{{- $_ := set $admin "tls" $at -}}
{{- end -}}
{{- end -}}
{{- $_ := set $policy "admin" $admin -}}
{{- end -}}
{{- $metrics := dict "max_tenants" (int .Values.metrics.maxTenants) -}}
{{- with (include "tollgate.metricsPort" .) }}{{ if ne . (printf "%d" (int $.Values.ports.admin)) }}{{ $_ := set $metrics "listen" (printf "0.0.0.0:%s" .) }}{{ end }}{{ end -}}
{{- if .Values.metrics.token.existingSecret }}{{ $_ := set $metrics "token_env" "TOLLGATE_METRICS_TOKEN" }}{{ end -}}
{{- $_ := set $policy "metrics" $metrics -}}
{{- toYaml $policy -}}
{{- end -}}

{{/*
The port serving /metrics: metrics.port, else the admin port; "" when
neither (no metrics, which the in-flight autoscaling metric needs).
*/}}
{{- define "tollgate.metricsPort" -}}
{{- if .Values.metrics.port -}}
{{- int .Values.metrics.port -}}
{{- else if .Values.admin.enabled -}}
{{- int .Values.ports.admin -}}
{{- else if .Values.autoscaling.inflight.enabled -}}
{{- fail "autoscaling.inflight.enabled needs /metrics: set metrics.port, or admin.enabled" -}}
{{- end -}}
{{- end -}}

{{/* The gateway's environment: secrets by reference only. */}}
{{- define "tollgate.databaseEnv" -}}
- name: TOLLGATE_DATABASE_URL
  valueFrom:
    secretKeyRef:
      name: {{ required "secrets.databaseURL.existingSecret: name the Secret holding the Postgres connection string" .Values.secrets.databaseURL.existingSecret }}
      key: {{ .Values.secrets.databaseURL.key }}
{{- with .Values.postgres.sslMode }}
- name: PGSSLMODE
  value: {{ . | quote }}
{{- end }}
{{- if .Values.postgres.ca.secretName }}
- name: PGSSLROOTCERT
  value: {{ include "tollgate.tlsDir" . }}/postgres-ca/ca.crt
{{- end }}
{{- if .Values.postgres.clientCert.secretName }}
- name: PGSSLCERT
  value: {{ include "tollgate.tlsDir" . }}/postgres-client/tls.crt
- name: PGSSLKEY
  value: {{ include "tollgate.tlsDir" . }}/postgres-client/tls.key
{{- end }}
{{- end -}}

{{- define "tollgate.env" -}}
{{ include "tollgate.databaseEnv" . }}
{{- if .Values.admin.enabled }}
- name: TOLLGATE_ADMIN_TOKEN
  valueFrom:
    secretKeyRef:
      name: {{ required "secrets.adminToken.existingSecret: name the Secret holding the admin token (or admin.enabled=false)" .Values.secrets.adminToken.existingSecret }}
      key: {{ .Values.secrets.adminToken.key }}
{{- end }}
{{- with .Values.metrics.token.existingSecret }}
- name: TOLLGATE_METRICS_TOKEN
  valueFrom:
    secretKeyRef:
      name: {{ . }}
      key: {{ $.Values.metrics.token.key }}
{{- end }}
{{- with .Values.secrets.redisPassword.existingSecret }}
- name: TOLLGATE_REDIS_PASSWORD
  valueFrom:
    secretKeyRef:
      name: {{ . }}
      key: {{ $.Values.secrets.redisPassword.key }}
{{- end }}
{{- range $env, $ref := .Values.secrets.providerKeys }}
{{- if $ref }}
- name: {{ $env }}
  valueFrom:
    secretKeyRef:
      name: {{ required (printf "secrets.providerKeys.%s.existingSecret: name the Secret holding %s" $env $env) $ref.existingSecret }}
      key: {{ required (printf "secrets.providerKeys.%s.key" $env) $ref.key }}
{{- end }}
{{- end }}
{{- with .Values.goMemLimit }}
- name: GOMEMLIMIT
  value: {{ . | quote }}
{{- end }}
- name: XDG_CACHE_HOME
  value: /var/cache
{{- with .Values.extraEnv }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{- define "tollgate.probe" -}}
httpGet:
  path: {{ .p.path }}
  port: http
  scheme: {{ .scheme }}
periodSeconds: {{ .p.periodSeconds }}
timeoutSeconds: {{ .p.timeoutSeconds }}
failureThreshold: {{ .p.failureThreshold }}
{{- end -}}

{{/* The pod template shared by the Deployment and the StatefulSet. */}}
{{- define "tollgate.podTemplate" -}}
metadata:
  labels:
    {{- include "tollgate.selectorLabels" . | nindent 4 }}
    {{- with .Values.podLabels }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
  {{- $annotations := deepCopy (.Values.podAnnotations | default dict) -}}
  {{- $metricsPort := include "tollgate.metricsPort" . -}}
  {{- if and $metricsPort .Values.metrics.scrapeAnnotations -}}
  {{- $_ := set $annotations "prometheus.io/scrape" "true" -}}
  {{- $_ := set $annotations "prometheus.io/port" $metricsPort -}}
  {{- $_ := set $annotations "prometheus.io/path" "/metrics" -}}
  {{- if and .Values.tls.admin.secretName (eq $metricsPort (printf "%d" (int .Values.ports.admin))) -}}
  {{- $_ := set $annotations "prometheus.io/scheme" "https" -}}
  {{- end -}}
  {{- end }}
  {{- with $annotations }}
  annotations:
    {{- toYaml . | nindent 4 }}
  {{- end }}
spec:
  serviceAccountName: {{ include "tollgate.serviceAccountName" . }}
  # The gateway never calls the Kubernetes API.
  automountServiceAccountToken: false
  {{- with .Values.imagePullSecrets }}
  imagePullSecrets:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  {{- with .Values.priorityClassName }}
  priorityClassName: {{ . }}
  {{- end }}
  # -shutdown-delay + drain_timeout + the call log's last batch.
  terminationGracePeriodSeconds: {{ include "tollgate.terminationGracePeriodSeconds" . }}
  securityContext:
    {{- toYaml .Values.podSecurityContext | nindent 4 }}
  initContainers:
    # The cache volume starts empty in a new pod: copy into it the compiled
    # plugins the image ships (made at image build, where the volume does
    # not hide them), and compile whatever the policy names that they lack
    # (another CPU, another plugin), so the gateway starts without
    # compiling (docs/SCALING.md, "Cold start").
    - name: warm-plugins
      image: {{ include "tollgate.image" . }}
      imagePullPolicy: {{ .Values.image.pullPolicy }}
      args:
        - plugin
        - warm
        - -policy
        - {{ include "tollgate.policyDir" . }}/policy.yaml
        - -seed
        - {{ include "tollgate.cacheDir" . }}/wazero
        - -cache-dir
        - /warm/wazero
      env:
        {{- include "tollgate.env" . | nindent 8 }}
      resources:
        {{- toYaml .Values.resources | nindent 8 }}
      securityContext:
        {{- toYaml .Values.securityContext | nindent 8 }}
      volumeMounts:
        - name: policy
          mountPath: {{ include "tollgate.policyDir" . }}
          readOnly: true
        - name: cache
          mountPath: /warm
        - name: tmp
          mountPath: /tmp
        {{- include "tollgate.tlsMounts" (dict "ctx" . "use" "all") | nindent 8 }}
  containers:
    - name: tollgate
      image: {{ include "tollgate.image" . }}
      imagePullPolicy: {{ .Values.image.pullPolicy }}
      args:
        - serve
        - -policy
        - {{ include "tollgate.policyDir" . }}/policy.yaml
        - -shutdown-delay
        - {{ printf "%ds" (int .Values.drain.shutdownDelaySeconds) }}
        - -log-level
        - {{ .Values.logLevel }}
        {{- range .Values.extraArgs }}
        - {{ . | quote }}
        {{- end }}
      ports:
        - name: http
          containerPort: {{ .Values.ports.http }}
          protocol: TCP
        {{- if .Values.admin.enabled }}
        - name: admin
          containerPort: {{ .Values.ports.admin }}
          protocol: TCP
        {{- end }}
        {{- if .Values.metrics.port }}
        - name: metrics
          containerPort: {{ .Values.metrics.port }}
          protocol: TCP
        {{- end }}
      env:
        {{- include "tollgate.env" . | nindent 8 }}
      startupProbe:
        {{- include "tollgate.probe" (dict "p" .Values.probes.startup "scheme" (include "tollgate.probeScheme" .)) | nindent 8 }}
      readinessProbe:
        {{- include "tollgate.probe" (dict "p" .Values.probes.readiness "scheme" (include "tollgate.probeScheme" .)) | nindent 8 }}
        successThreshold: 1
      livenessProbe:
        {{- include "tollgate.probe" (dict "p" .Values.probes.liveness "scheme" (include "tollgate.probeScheme" .)) | nindent 8 }}
      resources:
        {{- toYaml .Values.resources | nindent 8 }}
      securityContext:
        {{- toYaml .Values.securityContext | nindent 8 }}
      volumeMounts:
        - name: policy
          mountPath: {{ include "tollgate.policyDir" . }}
          readOnly: true
        - name: spool
          mountPath: {{ include "tollgate.spoolDir" . }}
        - name: cache
          mountPath: {{ include "tollgate.cacheDir" . }}
        - name: tmp
          mountPath: /tmp
        {{- include "tollgate.tlsMounts" (dict "ctx" . "use" "all") | nindent 8 }}
  volumes:
    # A directory mount (not subPath), so ConfigMap updates reach the pod
    # and the gateway reloads them.
    - name: policy
      configMap:
        name: {{ include "tollgate.fullname" . }}
    {{- if not .Values.callLog.spool.persistence.enabled }}
    # Survives container restarts, not the pod (values.yaml, callLog).
    - name: spool
      emptyDir:
        sizeLimit: {{ .Values.callLog.spool.emptyDir.sizeLimit }}
    {{- end }}
    # Compiled plugin code (wazero's cache), filled by warm-plugins.
    - name: cache
      emptyDir:
        sizeLimit: 256Mi
    - name: tmp
      emptyDir:
        sizeLimit: 64Mi
    {{- include "tollgate.tlsVolumes" (dict "ctx" . "use" "all") | nindent 4 }}
  {{- if .Values.topologySpread.enabled }}
  topologySpreadConstraints:
    - maxSkew: {{ .Values.topologySpread.maxSkew }}
      topologyKey: {{ .Values.topologySpread.topologyKey }}
      whenUnsatisfiable: {{ .Values.topologySpread.whenUnsatisfiable }}
      labelSelector:
        matchLabels:
          {{- include "tollgate.selectorLabels" . | nindent 10 }}
  {{- end }}
  {{- with .Values.nodeSelector }}
  nodeSelector:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  {{- with .Values.affinity }}
  affinity:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  {{- with .Values.tolerations }}
  tolerations:
    {{- toYaml . | nindent 4 }}
  {{- end }}
{{- end -}}
