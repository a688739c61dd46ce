package freeport

import (
	"net"
	"strconv"
	"testing"
)

// Every port of the range but one in use is handed out once; then the
// range is spent.
func TestGetHandsOutEachFreePortOnce(t *testing.T) {
	busy, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(low+(start+next)%span)))
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	seen := map[int]bool{}
	for range span - 1 {
		p, err := Get("127.0.0.1")
		if err != nil {
			t.Fatal(err)
		}
		if seen[p] || p < low || p >= high || p == busy.Addr().(*net.TCPAddr).Port {
			t.Fatalf("Get = %d: repeated, outside [%d, %d) or in use", p, low, high)
		}
		seen[p] = true
	}
	if p, err := Get("127.0.0.1"); err == nil {
		t.Errorf("Get = %d after the range was spent, want an error", p)
	}
}
