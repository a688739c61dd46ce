package render_test

import (
	"strconv"
	"testing"

	"github.com/openbao/operator/internal/render"
)

// BenchmarkRender measures a render of the sample: from the cache (the
// steady state of a reconcile loop) and uncached (a spec or status change).
//
//	go test ./internal/render -run '^$' -bench BenchmarkRender -benchmem
func BenchmarkRender(b *testing.B) {
	c := fixture(b, sample)
	vals := valuesWith(b, c, testOperator)
	b.Run("cached", func(b *testing.B) {
		r := newRenderer(b)
		if _, err := r.Render(c.Namespace, c.Name, vals); err != nil {
			b.Fatal(err)
		}
		b.ReportAllocs()
		for b.Loop() {
			if _, err := r.Render(c.Namespace, c.Name, vals); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("uncached", func(b *testing.B) {
		r := newRenderer(b)
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			// Distinct values each time: the hash misses the cache.
			v := withPodAnnotation(vals, strconv.Itoa(i))
			i++
			if _, err := r.Render(c.Namespace, c.Name, v); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("new renderer", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			r, err := render.New()
			if err != nil {
				b.Fatal(err)
			}
			if _, err := r.Render(c.Namespace, c.Name, vals); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// withPodAnnotation returns a shallow copy of vals with one pod annotation.
func withPodAnnotation(vals map[string]any, v string) map[string]any {
	out := make(map[string]any, len(vals)+1)
	for k, val := range vals {
		out[k] = val
	}
	out["podAnnotations"] = map[string]any{"bench/iteration": v}
	return out
}
