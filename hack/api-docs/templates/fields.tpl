{{- /*
fields lists a struct's fields: name, type and description, then default,
validation and the CEL rules set on the field itself (a type's own rules are
listed under the type).
*/ -}}
{{- define "fields" -}}
{{- range .Members }}
- **`{{ .Name }}`** _{{ markdownRenderType .Type }}_
{{- if eq .Name "metadata" }}: the object's metadata; see the Kubernetes API reference for its fields.
{{- else if .Doc }}: {{ template "docIn" dict "text" .Doc "indent" "  " }}
{{- end }}
{{- if or .Default .Validation }}

  {{ if .Default }}Default: `{{ .Default | replace "{  }" "{}" }}`.{{ if .Validation }} {{ end }}{{ end -}}
  {{ if .Validation }}Validation: {{ template "validation" .Validation }}.{{ end }}
{{- end }}
{{- $r := dict -}}
{{- template "resolve" dict "type" .Type "out" $r -}}
{{- $rules := index .Markers "kubebuilder:validation:XValidation" -}}
{{- $typeRules := list -}}
{{- if and $r.type $r.type.Markers }}{{ $typeRules = index $r.type.Markers "kubebuilder:validation:XValidation" }}{{ end -}}
{{- if and $rules (ne (printf "%v" $rules) (printf "%v" $typeRules)) }}

  Rules:
{{- range $rules }}
  - {{ template "rule" . }}
{{- end }}
{{- end }}
{{- end }}
{{- end -}}
