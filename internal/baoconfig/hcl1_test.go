package baoconfig

import (
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"strconv"

	hcl1 "github.com/hashicorp/hcl"
)

// Helpers that read a rendering back the way OpenBao does (HCL1) and put
// what was rendered and what was read into one comparable form.

// decodeHCL1 parses and decodes a rendering into a generic map.
func decodeHCL1(src []byte) (map[string]any, error) {
	var out map[string]any
	if err := hcl1.Unmarshal(src, &out); err != nil {
		return nil, fmt.Errorf("HCL1 decode: %w", err)
	}
	return out, nil
}

// normalizeInput maps a user value to what HCL1 decodes from its rendering:
// an object is a block, which HCL1 decodes as a list of maps, and a list of
// objects is repeated blocks, decoded as the same list; numbers are compared
// by their canonical text.
func normalizeInput(v any) any {
	switch v := v.(type) {
	case map[string]any:
		return []map[string]any{normalizeMap(v)}
	case []any:
		if isBlockValue(v) {
			out := make([]map[string]any, 0, len(v))
			for _, e := range v {
				out = append(out, normalizeMap(e.(map[string]any)))
			}
			return out
		}
		out := make([]any, 0, len(v))
		for _, e := range v {
			out = append(out, normalizeInput(e))
		}
		return out
	case json.Number:
		toks, err := numberTokens(v)
		if err != nil {
			return "invalid number"
		}
		return "number:" + string(toks.Bytes())
	case float64:
		return "number:" + string(floatTokens(v).Bytes())
	case int:
		return "number:" + strconv.Itoa(v)
	case int64:
		return "number:" + strconv.FormatInt(v, 10)
	}
	return v
}

func normalizeMap(m map[string]any) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = normalizeInput(v)
	}
	return out
}

// normalizeDecoded puts an HCL1-decoded value into normalizeInput's form.
func normalizeDecoded(v any) any {
	switch v := v.(type) {
	case []map[string]any:
		out := make([]map[string]any, 0, len(v))
		for _, m := range v {
			n := make(map[string]any, len(m))
			for k, e := range m {
				n[k] = normalizeDecoded(e)
			}
			out = append(out, n)
		}
		return out
	case []any:
		out := make([]any, 0, len(v))
		for _, e := range v {
			out = append(out, normalizeDecoded(e))
		}
		return out
	case int:
		return "number:" + strconv.Itoa(v)
	case float64:
		if v == math.Trunc(v) && math.Abs(v) < 1<<63 {
			return "number:" + strconv.FormatInt(int64(v), 10)
		}
		return "number:" + strconv.FormatFloat(v, 'g', -1, 64)
	}
	return v
}

// sameValue reports whether a user value survived the trip through HCL1.
func sameValue(input, decoded any) bool {
	return reflect.DeepEqual(normalizeInput(input), normalizeDecoded(decoded))
}

// protectedView returns what a rendering says for every key the user may
// not change.
func protectedView(decoded map[string]any) map[string]any {
	view := map[string]any{}
	for _, k := range protectedKeys {
		if v, ok := decoded[k]; ok {
			view[k] = v
		}
	}
	return view
}
