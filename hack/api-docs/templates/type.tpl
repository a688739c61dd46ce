{{- define "type" }}

### {{ .Name }}
{{- if .IsAlias }}

_Underlying type:_ {{ markdownRenderTypeLink .UnderlyingType }}
{{- end }}
{{- if .Doc }}

{{ template "doc" .Doc }}
{{- end }}
{{- if and .Validation (not .EnumValues) }}

Validation: {{ template "validation" .Validation }}.
{{- end }}
{{- template "rules" . }}
{{- if .References }}

Appears in:
{{- range $i, $r := .SortedReferences }}{{ if $i }},{{ end }} [{{ $r.Name }}](#{{ lower $r.Name }}){{ end }}.
{{- end }}
{{- if .Members }}

Fields:
{{ template "fields" . }}
{{- end }}
{{- if .EnumValues }}

Values:
{{ range .EnumValues }}
- `{{ .Name }}`{{ if .Doc }}: {{ template "docIn" dict "text" .Doc "indent" "  " }}{{ end }}
{{- end }}
{{- end }}
{{- end -}}
