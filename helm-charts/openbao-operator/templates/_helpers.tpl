{{/* Labels on every object of the chart. */}}
{{- define "openbao-operator.labels" -}}
app.kubernetes.io/name: openbao-operator
app.kubernetes.io/part-of: openbao-operator
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | quote }}
{{- with .Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{/* Labels that select the manager's pods; the same as config/manager's. */}}
{{- define "openbao-operator.selectorLabels" -}}
app.kubernetes.io/name: openbao-operator
control-plane: controller-manager
{{- end }}

{{/*
An image's repository with global.imageRegistry in place of its registry
host, for a mirror: the first path element is the host when it has a dot or
a colon or is localhost (as the container runtimes read it); a repository
without one (Docker Hub's) gets the mirror in front.
*/}}
{{- define "openbao-operator.repository" -}}
{{- $registry := trimSuffix "/" .root.Values.global.imageRegistry -}}
{{- if $registry -}}
{{- $parts := splitList "/" .repository -}}
{{- $first := first $parts -}}
{{- if and (gt (len $parts) 1) (or (contains "." $first) (contains ":" $first) (eq $first "localhost")) -}}
{{- $parts = rest $parts -}}
{{- end -}}
{{- printf "%s/%s" $registry (join "/" $parts) -}}
{{- else -}}
{{- .repository -}}
{{- end -}}
{{- end }}

{{/* The manager's image: the digest wins over the tag. */}}
{{- define "openbao-operator.image" -}}
{{- $repository := include "openbao-operator.repository" (dict "root" . "repository" .Values.image.repository) -}}
{{- if .Values.image.digest -}}
{{ $repository }}@{{ .Values.image.digest }}
{{- else -}}
{{ $repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end -}}
{{- end }}

{{/* The bao-wrapper image OpenBao pods run as PID 1: the digest wins over the tag. */}}
{{- define "openbao-operator.wrapperImage" -}}
{{- $repository := include "openbao-operator.repository" (dict "root" . "repository" .Values.wrapper.image.repository) -}}
{{- if .Values.wrapper.image.digest -}}
{{ $repository }}@{{ .Values.wrapper.image.digest }}
{{- else -}}
{{ $repository }}:{{ required "wrapper.image.tag or wrapper.image.digest is required" .Values.wrapper.image.tag }}
{{- end -}}
{{- end }}

{{/*
The pod-level settings the manager and the provisioner share: labels
(podLabels under the chart's own, which select the pods and so win),
annotations, and the pod spec's scheduling and security fields. Called with
the root and the component's own labels.
*/}}
{{- define "openbao-operator.podLabels" -}}
{{- toYaml (merge (fromYaml .labels) (deepCopy .root.Values.podLabels)) }}
{{- end }}

{{- define "openbao-operator.podSpecCommon" -}}
{{- with .Values.priorityClassName }}
priorityClassName: {{ . }}
{{- end }}
securityContext:
  {{- toYaml .Values.podSecurityContext | nindent 2 }}
{{- with .Values.nodeSelector }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .Values.tolerations }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end }}

{{/*
Objects kept byte for byte as in config/ (copied under files/, checked by
the chart's test): each document of the file, with the chart's labels added.
*/}}
{{- define "openbao-operator.fileObjects" -}}
{{- $root := .root -}}
{{- $content := $root.Files.Get .file -}}
{{- if hasKey . "from" }}{{ $content = replace .from .to $content }}{{ end -}}
{{- range $doc := regexSplit "(?m)^---\\s*$" $content -1 }}
{{- $obj := fromYaml $doc }}
{{- if $obj }}
{{- $meta := $obj.metadata | default dict }}
{{- $_ := set $meta "labels" (merge (fromYaml (include "openbao-operator.labels" $root)) (get $meta "labels" | default dict)) }}
{{- $_ := set $obj "metadata" $meta }}
---
{{ toYaml $obj }}
{{- end }}
{{- end }}
{{- end }}
