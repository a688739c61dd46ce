{{/* Labels on every object: standard names, the cluster, and commonLabels. */}}
{{- define "openbao.labels" -}}
{{ include "openbao.selectorLabels" . }}
{{ include "openbao.ownLabels" . }}
{{- end }}

{{/* Labels on the read replicas' objects: their own selector labels (which
     no selector of the voters matches) and the rest of openbao.labels. */}}
{{- define "openbao.readLabels" -}}
{{ toYaml .Values.cluster.readSelectorLabels }}
{{ include "openbao.ownLabels" . }}
{{- end }}

{{/* openbao.labels without the selector labels. */}}
{{- define "openbao.ownLabels" -}}
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

{{/* The image reference, with the registry host replaced when imageRegistry is
     set, and pinned to the verified digest when there is one (the tag stays
     for people; the runtime pulls by the digest). */}}
{{- define "openbao.image" -}}
{{- $repo := .Values.image.repository -}}
{{- if .Values.imageRegistry -}}
{{- $parts := splitn "/" 2 $repo -}}
{{- if and (gt (len (splitList "/" $repo)) 1) (or (contains "." $parts._0) (contains ":" $parts._0) (eq $parts._0 "localhost")) -}}
{{- $repo = $parts._1 -}}
{{- end -}}
{{- $repo = printf "%s/%s" .Values.imageRegistry $repo -}}
{{- end -}}
{{ $repo }}:{{ .Values.image.tag }}{{ with .Values.image.digest }}@{{ . }}{{ end }}
{{- end }}

{{/* With ACME, the operator, the servers' joins, the probes and the backup
     Jobs use the internal listener (port 8202), whose certificate the
     operator's CA signs: no ACME CA issues the .svc names they dial. */}}
{{- define "openbao.internalPortName" -}}
{{- if eq .Values.tls.mode "ACME" }}internal{{ else }}api{{ end -}}
{{- end }}
{{- define "openbao.internalPort" -}}
{{- if eq .Values.tls.mode "ACME" }}8202{{ else }}8200{{ end -}}
{{- end }}

{{/* The NetworkPolicy peer of the init window: the operator's namespace. */}}
{{- define "openbao.operatorOnly" -}}
- namespaceSelector:
    matchLabels:
      kubernetes.io/metadata.name: {{ .Values.operator.namespace }}
{{- end }}

{{/* NetworkPolicy peers that always reach the API: the servers, the
     operator's namespace, and the backup Jobs, which take snapshots from
     the active server. */}}
{{- define "openbao.operatorPeers" -}}
{{ include "openbao.serverPeers" . }}
{{- if .Values.operator.namespace }}
- namespaceSelector:
    matchLabels:
      kubernetes.io/metadata.name: {{ .Values.operator.namespace }}
{{- end }}
{{- if .Values.backup.jobs }}
- podSelector:
    matchLabels:
      app.kubernetes.io/component: backup
      openbao.org/cluster: {{ .Values.cluster.name }}
{{- end }}
{{- end }}

{{/* NetworkPolicy peers that are this cluster's servers: the voters, and
     the read replicas when there are any. */}}
{{- define "openbao.serverPeers" -}}
- podSelector:
    matchLabels:
      {{- include "openbao.selectorLabels" . | nindent 6 }}
{{- if .Values.readReplicas.enabled }}
- podSelector:
    matchLabels:
      {{- toYaml .Values.cluster.readSelectorLabels | nindent 6 }}
{{- end }}
{{- end }}
