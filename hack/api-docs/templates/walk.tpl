{{- /*
resolve sets .out.type to the named type a field of type .type holds: the
element of a pointer, slice or map (an alias of a basic type stays itself).
Templates return nothing but text, so the answer goes into the dict.
*/ -}}
{{- define "resolve" -}}
{{- $t := .type -}}
{{- range until 3 -}}
{{- if $t -}}
{{- /* Kind 0 is types.AliasKind: a named type, which is the answer. */ -}}
{{- if $t.ValueType }}{{ $t = $t.ValueType }}{{ else if and $t.UnderlyingType (ne $t.Kind 0) }}{{ $t = $t.UnderlyingType }}{{ end -}}
{{- end -}}
{{- end -}}
{{- $_ := set .out "type" $t -}}
{{- end -}}

{{- /*
walk renders, depth first, each type of this package that .type's fields
name and .seen does not hold yet, marking it seen before it descends so that
a type referring back to an ancestor ends the walk.
*/ -}}
{{- define "walk" -}}
{{- $gv := .gv -}}
{{- $seen := .seen -}}
{{- range .type.Members -}}
{{- $r := dict -}}
{{- template "resolve" dict "type" .Type "out" $r -}}
{{- $t := $r.type -}}
{{- if $t -}}
{{- $local := index $gv.Types $t.Name -}}
{{- if and $local (eq $local.UID $t.UID) (not (hasKey $seen $t.Name)) -}}
{{- $_ := set $seen $t.Name true -}}
{{- template "type" $local -}}
{{- template "walk" dict "gv" $gv "type" $local "seen" $seen -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- end -}}
