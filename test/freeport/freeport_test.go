package freeport

import (
	"net"
	"strconv"
	"testing"
)

// Get hands out each port of the range at most once, never one in use,
// and errors once the range is spent. Other processes (the envtest tier's
// servers run beside this one) may hold ports of the range too, so the
// range can be spent before all but one port were handed out.
func TestGetHandsOutEachFreePortOnce(t *testing.T) {
	busy, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(low+(start+next)%span)))
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	seen := map[int]bool{}
	for range span {
		p, err := Get("127.0.0.1")
		if err != nil {
			break
		}
		if seen[p] || p < low || p >= high || p == busy.Addr().(*net.TCPAddr).Port {
			t.Fatalf("Get = %d: repeated, outside [%d, %d) or in use", p, low, high)
		}
		seen[p] = true
	}
	if len(seen) == 0 || len(seen) > span-1 {
		t.Fatalf("Get handed out %d ports of %d, one of them held by this test", len(seen), span)
	}
	if p, err := Get("127.0.0.1"); err == nil {
		t.Errorf("Get = %d after the range was spent, want an error", p)
	}
}
