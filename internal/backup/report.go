package backup

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// TerminationLog is where the executor writes its Report; the kubelet
// copies it into the pod's status as the container's termination message.
const TerminationLog = "/dev/termination-log"

// maxReport is the kubelet's limit on a termination message.
const maxReport = 4096

// Report is what the executor says about one run, as JSON: the object it
// wrote, or why it failed. It holds names, sizes and digests, never a
// credential, a token or a byte of the snapshot.
type Report struct {
	Key    string `json:"key,omitempty"`
	Size   int64  `json:"size,omitempty"`
	SHA256 string `json:"sha256,omitempty"`
	// Duration is from the start of the run to the verified object (or
	// the failure), as Go writes durations ("12.5s").
	Duration string `json:"duration,omitempty"`
	// RaftIndex is the Raft index the snapshot was taken at.
	RaftIndex uint64 `json:"raftIndex,omitempty"`
	// PeakRSSBytes is the executor's peak resident memory (VmHWM), the
	// mapped pages of its binary included; PeakAnonBytes the peak of its
	// anonymous memory (heap, stacks, part buffers), sampled.
	PeakRSSBytes  int64 `json:"peakRSSBytes,omitempty"`
	PeakAnonBytes int64 `json:"peakAnonBytes,omitempty"`
	// Canary is the writtenAt of the canary written just before the
	// snapshot (CanaryValue); CanaryError says, in a short sentence
	// without secrets, why a backup that succeeded has none.
	Canary      string `json:"canary,omitempty"`
	CanaryError string `json:"canaryError,omitempty"`
	// Retention is what the executor's retention did after the upload,
	// when it was given one (ExecutorConfig.Retention); nil otherwise.
	Retention *RetentionReport `json:"retention,omitempty"`
	// Unproven is what retention, or a restore's latest, ignored under the
	// prefix because its name is not one the cluster's executor signed.
	Unproven *Ignored `json:"unproven,omitempty"`
	// Reason (CamelCase) and Error say why a run failed.
	Reason string `json:"reason,omitempty"`
	Error  string `json:"error,omitempty"`
}

// RetentionReport is what the executor says its retention deleted. The
// operator audits it as the executor's word: it cannot check it without
// the identity the executor used.
type RetentionReport struct {
	// Deleted are the keys deleted, oldest first; Encode leaves out the
	// newest of them when the message would exceed the kubelet's limit.
	Deleted []string `json:"deleted,omitempty"`
	// DeletedCount is how many were deleted, listed or not.
	DeletedCount int `json:"deletedCount"`
	// Error says why retention stopped; the backup succeeded regardless.
	Error string `json:"error,omitempty"`
}

// maxReportedDeletions bounds the keys a report lists; fewer fit anyway.
const maxReportedDeletions = 100

// Failed says the run failed.
func (r Report) Failed() bool { return r.Reason != "" }

// Encode writes the report as JSON within the kubelet's limit, leaving
// out deleted keys (never their count) and shortening the error texts if
// it must.
func (r Report) Encode() []byte {
	if r.Retention != nil {
		ret := *r.Retention
		ret.Deleted = ret.Deleted[:min(len(ret.Deleted), maxReportedDeletions)]
		r.Retention = &ret
	}
	data, _ := json.Marshal(r)
	if len(data) > maxReport && r.Retention != nil && len(r.Retention.Error) > 256 {
		r.Retention.Error = r.Retention.Error[:256] + "..."
		data, _ = json.Marshal(r)
	}
	for len(data) > maxReport && r.Retention != nil && len(r.Retention.Deleted) > 0 {
		r.Retention.Deleted = r.Retention.Deleted[:len(r.Retention.Deleted)-1]
		data, _ = json.Marshal(r)
	}
	if len(data) <= maxReport {
		return data
	}
	over := len(data) - maxReport + len("...")
	if over < len(r.Error) {
		r.Error = r.Error[:len(r.Error)-over] + "..."
	} else {
		r.Error = ""
	}
	data, _ = json.Marshal(r)
	return data
}

// ErrNoReport says a finished pod left no termination message (it was
// killed: the deadline, an eviction, out of memory).
var ErrNoReport = errors.New("the executor left no report")

// ParseReport reads a termination message. A success must name the
// object, its size and digest.
func ParseReport(msg string) (Report, error) {
	if msg == "" {
		return Report{}, ErrNoReport
	}
	var r Report
	if err := json.Unmarshal([]byte(msg), &r); err != nil {
		return Report{}, fmt.Errorf("the executor's report is not JSON")
	}
	if !r.Failed() && (r.Key == "" || r.Size <= 0 || len(r.SHA256) != 64) {
		return Report{}, errors.New("the executor's report names no complete object")
	}
	return r, nil
}

// DurationValue returns the report's duration; zero when it has none.
func (r Report) DurationValue() time.Duration {
	d, _ := time.ParseDuration(r.Duration)
	return d
}
