package baoconfig

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"testing"
)

// FuzzUserConfig renders arbitrary user keys and values (the value is JSON
// when it decodes, else the raw text as a string) and checks that either
// Render refuses them with ErrInvalid, or HCL1 parses the output, every
// protected stanza reads exactly as in the rendering without user keys, and
// the user value reads back unchanged.
func FuzzUserConfig(f *testing.F) {
	seeds := []struct{ key, value string }{
		{"default_lease_ttl", `"768h"`},
		{"cache_size", `131072`},
		{"raw_storage_endpoint", `true`},
		{"cluster_name", `"x\"\n}\nstorage \"inmem\" {"`},
		{"cluster_name", `"${file(\"/etc/passwd\")}"`},
		{"cluster_name", `"%{ if true }x%{ endif }"`},
		{"cluster_name", `"$${x} %%{y} \\${z}"`},
		{"cluster_name", `"\u0000\u001f\u007f\ue123\u2028"`},
		{"audit", `[{"type":"file","path":"file/","options":{"file_path":"/x"}}]`},
		{"x", `{"a b":{"true":false,"${x}":[1,2.5,-3e300]}}`},
		{"x", `[[1]]`},
		{"x", `null`},
		{"listener", `{"tcp":{"address":"0.0.0.0:1"}}`},
		{"seal", `{}`},
		{"Storage", `{}`},
		{"storage\n", `{}`},
		{"ui", `true`},
		{"x", `1E400`},
		{"x", `-0`},
		{"x", `not json at all ${`},
	}
	for _, s := range seeds {
		f.Add(s.key, []byte(s.value))
	}
	base, err := Render(testInput())
	if err != nil {
		f.Fatal(err)
	}
	baseDecoded, err := decodeHCL1(base)
	if err != nil {
		f.Fatal(err)
	}
	want := protectedView(baseDecoded)

	f.Fuzz(func(t *testing.T, key string, raw []byte) {
		value := fuzzValue(raw)
		// The value is tried under the fuzzed key and under a valid one, so
		// that values are exercised when the key is refused.
		checkUserRendering(t, key, value, want)
		checkUserRendering(t, "cluster_name", value, want)
	})
}

func checkUserRendering(t *testing.T, key string, value any, want map[string]any) {
	t.Helper()
	out, err := Render(testInput(user(map[string]any{key: value})))
	if err != nil {
		if !errors.Is(err, ErrInvalid) {
			t.Fatalf("error %v does not wrap ErrInvalid", err)
		}
		return
	}
	decoded, err := decodeHCL1(out)
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if got := protectedView(decoded); !reflect.DeepEqual(got, want) {
		t.Fatalf("protected stanzas changed:\ngot  %#v\nwant %#v\n%s", got, want, out)
	}
	if !sameValue(value, decoded[key]) {
		t.Fatalf("key %q: HCL1 read %#v, want %#v\n%s", key, decoded[key], value, out)
	}
}

func fuzzValue(raw []byte) any {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil || dec.More() {
		return string(raw)
	}
	return v
}
