package baoconfig

import "testing"

func BenchmarkRender(b *testing.B) {
	in := goldenCases["user-config"]
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Render(in); err != nil {
			b.Fatal(err)
		}
	}
}
