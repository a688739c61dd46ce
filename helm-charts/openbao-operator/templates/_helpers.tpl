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

{{/* The manager's image: the digest wins over the tag. */}}
{{- define "openbao-operator.image" -}}
{{- if .Values.image.digest -}}
{{ .Values.image.repository }}@{{ .Values.image.digest }}
{{- else -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end -}}
{{- end }}

{{/* The bao-wrapper image OpenBao pods run as PID 1: the digest wins over the tag. */}}
{{- define "openbao-operator.wrapperImage" -}}
{{- if .Values.wrapper.image.digest -}}
{{ .Values.wrapper.image.repository }}@{{ .Values.wrapper.image.digest }}
{{- else -}}
{{ .Values.wrapper.image.repository }}:{{ required "wrapper.image.tag or wrapper.image.digest is required" .Values.wrapper.image.tag }}
{{- end -}}
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
