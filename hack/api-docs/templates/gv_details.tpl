{{- define "gvDetails" -}}
{{- $gv := . -}}
{{- $seen := dict -}}
{{- $order := list -}}
{{- range list "OpenBaoCluster" "OpenBaoBackup" "OpenBaoRestore" "OpenBaoTenant" -}}
{{- if has . $gv.Kinds }}{{ $order = append $order . }}{{ end -}}
{{- end -}}
{{- range $gv.SortedKinds -}}
{{- if not (has . $order) }}{{ $order = append $order . }}{{ end -}}
{{- end -}}
{{- range $order }}{{ $_ := set $seen . true }}{{ end -}}

The kinds, all in API group and version `{{ $gv.GroupVersionString }}`:
{{ range $order }}
- [{{ . }}](#{{ lower . }})
{{- end }}
{{- range $order -}}
{{- $t := $gv.TypeForKind . }}

## {{ $t.Name }}

{{ template "doc" $t.Doc }}
{{- template "rules" $t }}

Fields:

- **`apiVersion`** _string_: `{{ $gv.GroupVersionString }}`
- **`kind`** _string_: `{{ $t.Name }}`
{{- template "fields" $t }}
{{- template "walk" dict "gv" $gv "type" $t "seen" $seen }}
{{- end -}}
{{- $rest := list -}}
{{- range $gv.SortedTypes -}}
{{- if and (markdownShouldRenderType .) (not (hasKey $seen .Name)) }}{{ $rest = append $rest . }}{{ end -}}
{{- end -}}
{{- if $rest }}

## Other types
{{- range $rest }}
{{- template "type" . }}
{{- end }}
{{- end }}
{{- end -}}
