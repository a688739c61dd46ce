{{- /*
doc turns a Go doc comment into Markdown: the comment's wrapped lines join
into one line per paragraph, lines starting "- " stay list items, and
outside `code` a < or * is escaped so that <cluster> is not read as an HTML
tag nor *-suffix as emphasis. docIn does the same with every line after the
first indented by .indent, for the body of a list item.
*/ -}}
{{- define "doc" -}}
{{- template "docIn" dict "text" . "indent" "" -}}
{{- end -}}

{{- define "docIn" -}}
{{- $in := .indent -}}
{{- $paras := list -}}
{{- range splitList "\n\n" (trim .text) -}}
{{- $p := "" -}}
{{- range splitList "\n" . -}}
{{- $l := trim . -}}
{{- if hasPrefix "- " $l }}{{ $p = printf "%s\n%s%s" $p $in $l }}{{ else if $l }}{{ $p = printf "%s %s" $p $l }}{{ end -}}
{{- end -}}
{{- if trim $p }}{{ $paras = append $paras (trim $p) }}{{ end -}}
{{- end -}}
{{- range $i, $s := splitList "`" (join (printf "\n\n%s" $in) $paras) -}}
{{- if $i }}`{{ end -}}
{{- if mod $i 2 }}{{ $s }}{{ else }}{{ $s | replace "<" "\\<" | replace "*" "\\*" }}{{ end -}}
{{- end -}}
{{- end -}}

{{- /*
validation joins the tool's "Name: value" strings as "Name value", values
other than numbers as code (the tool quotes only some patterns).
*/ -}}
{{- define "validation" -}}
{{- range $i, $v := . -}}
{{- if $i }}; {{ end -}}
{{- $kv := splitn ": " 2 $v -}}
{{- $val := $kv._1 | trimPrefix "`" | trimSuffix "`" -}}
{{- $kv._0 }} {{ if regexMatch "^-?[0-9][0-9.e+]*$" $val }}{{ $val }}{{ else if contains "`" $val }}`` {{ $val }} ``{{ else }}`{{ $val }}`{{ end -}}
{{- end -}}
{{- end -}}

{{- /* rule is a CEL validation rule: its message, or the rule itself when the message is computed. */ -}}
{{- define "rule" -}}
{{- if .Message }}{{ template "doc" .Message }}{{ else }}`{{ .Rule }}`{{ end -}}
{{- end -}}

{{- /* rules lists the CEL validation rules set on a type. */ -}}
{{- define "rules" -}}
{{- $rules := index .Markers "kubebuilder:validation:XValidation" -}}
{{- if $rules }}

Rules:
{{ range $rules }}
- {{ template "rule" . }}
{{- end }}
{{- end -}}
{{- end -}}
