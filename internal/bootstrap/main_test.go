package bootstrap_test

import (
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
)

// rootToken is the token the fake OpenBao returns. Every error string,
// decision message and log line the tests produce is recorded, and
// TestMain fails the run if any of them holds it.
const rootToken = "s.Fake-Root-Token-4b1d"

var (
	recordedMu sync.Mutex
	recorded   []string
)

// record keeps a string the operator would show anywhere (log, event,
// condition, error) for the final scan.
func record(s string) {
	recordedMu.Lock()
	defer recordedMu.Unlock()
	recorded = append(recorded, s)
}

func recordErr(err error) {
	if err != nil {
		record(err.Error())
		record(fmt.Sprintf("%+v", err))
		record(fmt.Sprintf("%#v", err))
	}
}

func TestMain(m *testing.M) {
	code := m.Run()
	recordedMu.Lock()
	defer recordedMu.Unlock()
	if len(recorded) == 0 {
		// A -run or -fuzz filter that runs no recording test.
		fmt.Println("token scan: no strings recorded")
	}
	for _, s := range recorded {
		if strings.Contains(s, rootToken) {
			fmt.Printf("FAIL: the root token appears in an operator-visible string: %q\n", s)
			code = 1
		}
	}
	if code == 0 && len(recorded) > 0 {
		fmt.Printf("token scan: %d operator-visible strings, none holds the root token\n", len(recorded))
	}
	os.Exit(code)
}
