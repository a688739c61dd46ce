// Package logkeys gives the operator's log lines the keys docs/audit-log.md
// lists (namespace, name, controller, reconcile_id):
// controller-runtime adds the first three to every reconcile's logger and
// the fourth as reconcileID, which this package renames on every line.
package logkeys

import "github.com/go-logr/logr"

// renamed maps a key controller-runtime writes to the design's name for it.
var renamed = map[string]string{"reconcileID": "reconcile_id"}

// New wraps l so that every line it and its descendants write carries the
// design's keys. The wrapper adds a call frame, which it declares, so the
// caller a line names is still the one that logged it.
func New(l logr.Logger) logr.Logger {
	if l.GetSink() == nil {
		return l
	}
	return logr.New(&sink{inner: l.GetSink()})
}

type sink struct{ inner logr.LogSink }

// Init adds this wrapper's one frame to the inner sink, which counted
// logr's own frames when it was made (sinks add what Init gives them).
func (s *sink) Init(logr.RuntimeInfo) { s.inner.Init(logr.RuntimeInfo{CallDepth: 1}) }

func (s *sink) Enabled(level int) bool { return s.inner.Enabled(level) }

func (s *sink) Info(level int, msg string, kv ...any) { s.inner.Info(level, msg, rename(kv)...) }

func (s *sink) Error(err error, msg string, kv ...any) { s.inner.Error(err, msg, rename(kv)...) }

func (s *sink) WithValues(kv ...any) logr.LogSink {
	return &sink{inner: s.inner.WithValues(rename(kv)...)}
}

func (s *sink) WithName(name string) logr.LogSink { return &sink{inner: s.inner.WithName(name)} }

// WithCallDepth passes a caller's extra frames on, where the inner sink
// tracks callers.
func (s *sink) WithCallDepth(depth int) logr.LogSink {
	if cd, ok := s.inner.(logr.CallDepthLogSink); ok {
		return &sink{inner: cd.WithCallDepth(depth)}
	}
	return s
}

// rename returns kv with renamed keys, copying it only when a key changes.
func rename(kv []any) []any {
	out := kv
	for i := 0; i+1 < len(kv); i += 2 {
		key, ok := kv[i].(string)
		if !ok {
			continue
		}
		if to, ok := renamed[key]; ok {
			if &out[0] == &kv[0] {
				out = append([]any(nil), kv...)
			}
			out[i] = to
		}
	}
	return out
}
