package localnode

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// State is what Up changed on the host, written after every change so that
// Down can undo it from another process, after a crash or an interrupt.
type State struct {
	NodeIP  string            `json:"nodeIP"`
	Owner   string            `json:"owner"` // who started it: "demo", "e2e", "cli"
	Ready   bool              `json:"ready"` // true once Up finished
	Procs   []Proc            `json:"procs"`
	Before  Facts             `json:"before"`           // host facts recorded before Up changed anything
	Created []string          `json:"created"`          // global paths that did not exist before
	Images  map[string]string `json:"images,omitempty"` // role -> reference
}

// errNoState means no node was started from this state directory.
var errNoState = errors.New("no local node state")

func loadState(c Config) (*State, error) {
	data, err := os.ReadFile(c.statePath())
	if errors.Is(err, os.ErrNotExist) {
		return nil, errNoState
	}
	if err != nil {
		return nil, fmt.Errorf("read state: %w", err)
	}
	var s State
	if err := json.Unmarshal(data, &s); err != nil {
		return nil, fmt.Errorf("decode state %s: %w", c.statePath(), err)
	}
	return &s, nil
}

// save writes the state atomically: a crash leaves the old or the new file.
func (s *State) save(c Config) error {
	data, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return fmt.Errorf("encode state: %w", err)
	}
	if err := os.MkdirAll(filepath.Dir(c.statePath()), 0o755); err != nil {
		return fmt.Errorf("create state dir: %w", err)
	}
	tmp := c.statePath() + ".tmp"
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		return fmt.Errorf("write state: %w", err)
	}
	if err := os.Rename(tmp, c.statePath()); err != nil {
		return fmt.Errorf("write state: %w", err)
	}
	return nil
}
