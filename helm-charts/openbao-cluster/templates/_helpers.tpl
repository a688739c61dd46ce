{{/* Labels on every object: standard names, the cluster, and commonLabels. */}}
{{- define "openbao.labels" -}}
{{ include "openbao.selectorLabels" . }}
app.kubernetes.io/component: server
app.kubernetes.io/version: {{ .Values.image.tag | quote }}
app.kubernetes.io/managed-by: openbao-operator
openbao.org/cluster: {{ .Values.cluster.name }}
{{- with .Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{/* Labels of what belongs to the cluster's backups; never the servers' selector. */}}
{{- define "openbao.backupLabels" -}}
app.kubernetes.io/component: backup
app.kubernetes.io/managed-by: openbao-operator
openbao.org/cluster: {{ .Values.cluster.name }}
{{- with .Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{/* Labels that select the cluster's pods; they never change. */}}
{{- define "openbao.selectorLabels" -}}
{{ toYaml .Values.cluster.selectorLabels }}
{{- end }}

{{/* The image reference, with the registry host replaced when imageRegistry is set. */}}
{{- define "openbao.image" -}}
{{- $repo := .Values.image.repository -}}
{{- if .Values.imageRegistry -}}
{{- $parts := splitn "/" 2 $repo -}}
{{- if and (gt (len (splitList "/" $repo)) 1) (or (contains "." $parts._0) (contains ":" $parts._0) (eq $parts._0 "localhost")) -}}
{{- $repo = $parts._1 -}}
{{- end -}}
{{- $repo = printf "%s/%s" .Values.imageRegistry $repo -}}
{{- end -}}
{{ $repo }}:{{ .Values.image.tag }}
{{- end }}

{{/* TLS files are mounted unless OpenBao obtains its certificate by ACME. */}}
{{- define "openbao.mountsTLS" -}}
{{- if ne .Values.tls.mode "ACME" }}true{{ end -}}
{{- end }}
