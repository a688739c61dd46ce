package wrapper

import (
	"testing"
)

// BenchmarkWatcherPollUnchanged is the cost of one poll of a mounted TLS
// Secret that did not change: what the wrapper spends every interval.
func BenchmarkWatcherPollUnchanged(b *testing.B) {
	dir := b.TempDir()
	write(b, dir, tlsFiles(b)())
	w := NewWatcher(watched(dir))
	for b.Loop() {
		if changed, _ := w.Poll(); changed {
			b.Fatal("changed")
		}
	}
}

// BenchmarkWatcherPollChanged is the cost of a poll that sees a new
// certificate and checks that its key matches.
func BenchmarkWatcherPollChanged(b *testing.B) {
	dir := b.TempDir()
	issue := tlsFiles(b)
	sets := []map[string][]byte{issue(), issue()}
	write(b, dir, sets[0])
	w := NewWatcher(watched(dir))
	i := 0
	for b.Loop() {
		b.StopTimer()
		i++
		write(b, dir, sets[i%2])
		b.StartTimer()
		if changed, note := w.Poll(); !changed {
			b.Fatal(note)
		}
	}
}
