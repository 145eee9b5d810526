{{/*
The labels Helm's conventions add to every object's metadata (the pod
templates and selectors keep only app.kubernetes.io/name, as deploy/base
has them, so that a Deployment made by kustomize can be taken over).
*/}}
{{- define "gandiva.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/part-of: gandiva
{{- end }}

{{/* The image of the scheduler and the agent. */}}
{{- define "gandiva.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag }}
{{- end }}

{{/* Whether the scheduler serves its metrics. */}}
{{- define "gandiva.metrics" -}}
{{- if or .Values.metrics.enabled .Values.serviceMonitor.enabled }}true{{ end }}
{{- end }}

{{/*
The release namespace must carry gandiva.io/system=true: the admission
policy gandiva-accounts lets the service accounts "gandiva" and
"gandiva-agent" be created only in such a namespace. On an install or an
upgrade (not helm template or lint, where lookup returns nothing) a
namespace that exists without it stops the release here, saying so.
*/}}
{{- define "gandiva.namespaceCheck" -}}
{{- $ns := lookup "v1" "Namespace" "" .Release.Namespace }}
{{- if $ns }}
{{- $labels := default (dict) $ns.metadata.labels }}
{{- if ne (get $labels "gandiva.io/system") "true" }}
{{- fail (printf "namespace %s lacks the label gandiva.io/system=true, without which the admission policies refuse gandiva's service accounts in it: kubectl label namespace %s gandiva.io/system=true (docs/KUBERNETES.md)" .Release.Namespace .Release.Namespace) }}
{{- end }}
{{- end }}
{{- end }}
