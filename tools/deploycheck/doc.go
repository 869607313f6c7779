// Package deploycheck checks Tollgate's deployment files on a machine with
// no Kubernetes cluster, no Docker engine and no network beyond the Go
// module proxy:
//
//   - The Helm chart (deploy/helm/tollgate) is rendered with Helm's own
//     engine (helm.sh/helm/v3/pkg/engine, the code `helm template` runs) and
//     linted with Helm's linter.
//   - Every rendered manifest is decoded strictly into the typed structs of
//     k8s.io/api (apps/v1 Deployment, StatefulSet, core/v1 Service, ...): an
//     unknown or misspelt field, a wrong type, an invalid quantity or a
//     duplicate key is an error, and so is a kind the checker does not know.
//     Kubernetes JSON schemas (kubeconform) would need a download; the
//     typed structs are the same API definitions, compiled in. Names and
//     labels are checked with apimachinery's validators, as the API server
//     does.
//   - Semantic checks tie the manifests to the gateway: probes on /readyz
//     and /healthz, the grace period longer than -shutdown-delay plus the
//     policy's drain_timeout, resources set, Secrets only by reference, the
//     spool on the volume the policy names, an init container that fills
//     the compilation cache from the image's before the gateway starts
//     (`tollgate plugin warm`, into the volume and directory the policy's
//     plugin_runtime.cache_dir names), HPA and PDB consistent with the
//     workload, every TLS file the policy or the PGSSL* variables name on
//     a whole, read-only Secret mount of each container that reads it, and
//     the probes' scheme HTTPS exactly when the public listener is TLS
//     (CheckChart).
//   - The rendered policy and deploy/docker/policy.yaml are validated by the
//     tollgate binary itself (`tollgate validate`), against plugins built by
//     deploy/docker/build.sh — the image's build steps — from a copy of the
//     build context filtered by Dockerfile.dockerignore; the Dockerfile's
//     final stages are checked to copy what that build produced, and the
//     compiled-plugin cache it ships to hold every plugin of the image's
//     policy and of the embedded default.
//   - deploy/docker/compose.yaml is loaded with compose-go (the Compose
//     specification's loader and JSON schema, what `docker compose config`
//     runs) and checked for its services, dependencies and health checks.
//
// What it cannot check: anything the API server decides beyond types and
// names (admission, defaulting, field validation such as enum values the
// Go types do not encode), that images can be pulled or built with a real
// Docker engine, that a custom-metrics adapter serves
// tollgate_inflight_requests, or that a StorageClass exists.
package deploycheck
