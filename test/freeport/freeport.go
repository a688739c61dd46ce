// Package freeport hands out TCP ports for servers a test is about to start
// (bao, MinIO, emulators).
//
// A port taken from a listener on port 0 and closed again comes from
// Linux's ephemeral range (32768–60999), from which the kernel also takes
// the next port-0 listener and every outgoing connection's local port: with
// many servers starting in parallel, one of them sometimes found its port
// taken ("address already in use"). So ports come from below that range,
// each process walks it from its own starting point (by PID), so that two
// test processes running side by side rarely meet, and none is handed out
// twice by one process.
package freeport

import (
	"fmt"
	"net"
	"os"
	"strconv"
	"sync"
)

// The ports span [low, high): above the node's fixed ports (kubelet
// 10250–10259, etcd 12379/12380), below Kubernetes' NodePort range
// (30000–32767, which kube-proxy captures on the node's addresses).
const (
	low  = 15000
	high = 30000
	span = high - low
)

var (
	mu        sync.Mutex
	next      int
	handedOut = map[int]bool{}
	start     = (os.Getpid() * 7919) % span // 7919 is prime: neighbouring PIDs start far apart
)

// Get returns a port no one listens on at host now, which this process has
// not handed out before.
func Get(host string) (int, error) {
	mu.Lock()
	defer mu.Unlock()
	for range span {
		port := low + (start+next)%span
		next = (next + 1) % span
		if handedOut[port] || !free(host, port) {
			continue
		}
		handedOut[port] = true
		return port, nil
	}
	return 0, fmt.Errorf("no free port on %s in %d-%d", host, low, high-1)
}

func free(host string, port int) bool {
	l, err := net.Listen("tcp", net.JoinHostPort(host, strconv.Itoa(port)))
	if err != nil {
		return false
	}
	_ = l.Close()
	return true
}
