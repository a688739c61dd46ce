package plugin

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Containers whose logs `logs` reads: the server's (the chart's
// StatefulSet) and the operator's (config/manager).
const (
	ServerContainer   = "openbao"
	OperatorContainer = "manager"
)

// LogsOptions are the flags of `logs`.
type LogsOptions struct {
	// Since keeps lines newer than this; 0 keeps all.
	Since time.Duration
	// Tail keeps the newest lines of each log; negative keeps all. For the
	// operator it counts the lines kept about the cluster (not while
	// following).
	Tail   int64
	Follow bool
	// Operator adds the operator's lines about the cluster, from its pods
	// in OperatorNamespace.
	Operator          bool
	OperatorNamespace string
}

// LogSource opens the log of one container of a pod.
type LogSource func(ctx context.Context, namespace, pod string, opts *corev1.PodLogOptions) (io.ReadCloser, error)

// logStream is one log `logs` prints: every line gets prefix; keep, when
// set, drops the lines it refuses.
type logStream struct {
	prefix, namespace, pod string
	opts                   *corev1.PodLogOptions
	keep                   func([]byte) bool
	tail                   int64 // kept lines to print at most, counted after keep; <0 all
}

// OperatorLineAbout says whether a line of the operator's log is about
// the cluster: a JSON object whose namespace and name keys are the
// cluster's (docs/audit-log.md). Other lines, and lines that are not
// JSON, are dropped.
func OperatorLineAbout(line []byte, namespace, name string) bool {
	line = bytes.TrimSpace(line)
	if len(line) == 0 || line[0] != '{' {
		return false
	}
	var keys struct {
		Namespace *string `json:"namespace"`
		Name      *string `json:"name"`
	}
	if json.Unmarshal(line, &keys) != nil || keys.Namespace == nil || keys.Name == nil {
		return false
	}
	return *keys.Namespace == namespace && *keys.Name == name
}

// Logs prints the logs of every server of the cluster, each line
// prefixed by its pod's name, and with o.Operator the operator's lines
// about the cluster. A log that cannot be read gets a one-line note on
// notes, and the others are still printed; it fails only when no
// server's log could be read.
func (c *Commands) Logs(ctx context.Context, name string, o LogsOptions, out, notes io.Writer) error {
	cluster, pods, err := c.clusterAndServerPods(ctx, name)
	if err != nil {
		return err
	}
	if len(pods.Items) == 0 {
		return fmt.Errorf("cluster %s/%s has no server pod (labels %s)", c.Namespace, name, cluster.PodLabelSelector())
	}
	names := make([]string, 0, len(pods.Items))
	for _, p := range pods.Items {
		names = append(names, p.Name)
	}
	slices.SortFunc(names, byOrdinal)
	var streams []logStream
	for _, pod := range names {
		streams = append(streams, logStream{prefix: "[" + pod + "] ", namespace: c.Namespace, pod: pod, tail: -1,
			opts: podLogOptions(ServerContainer, o, o.Tail)})
	}
	servers := len(streams)
	if o.Operator {
		streams = append(streams, c.operatorStreams(ctx, name, o, notes)...)
	}
	read := c.printLogs(ctx, streams, o.Follow, out, notes)
	if !slices.Contains(read[:servers], true) {
		return fmt.Errorf("no server log of %s/%s could be read", c.Namespace, name)
	}
	return nil
}

// operatorStreams are the logs of the operator's pods, filtered to the
// cluster's lines. A caller who may not list them gets a note.
func (c *Commands) operatorStreams(ctx context.Context, name string, o LogsOptions, notes io.Writer) []logStream {
	pods, err := c.Kube.CoreV1().Pods(o.OperatorNamespace).List(ctx, metav1.ListOptions{
		LabelSelector: metav1.FormatLabelSelector(&metav1.LabelSelector{MatchLabels: OperatorSelector}),
	})
	switch {
	case apierrors.IsForbidden(err):
		fmt.Fprintf(notes, "note: the operator's lines are not shown: you may not list pods in namespace %s (--operator-namespace)\n",
			o.OperatorNamespace)
		return nil
	case err != nil:
		fmt.Fprintf(notes, "note: the operator's lines are not shown: list its pods in %s: %v\n", o.OperatorNamespace, err)
		return nil
	case len(pods.Items) == 0:
		fmt.Fprintf(notes, "note: the operator's lines are not shown: no operator pod in namespace %s (--operator-namespace)\n",
			o.OperatorNamespace)
		return nil
	}
	keep := func(line []byte) bool { return OperatorLineAbout(line, c.Namespace, name) }
	tail := o.Tail
	if o.Follow {
		tail = -1
	}
	var streams []logStream
	for _, p := range pods.Items {
		// The tail counts the cluster's lines, so the operator's whole log
		// (since --since) is read and filtered here.
		streams = append(streams, logStream{prefix: "[operator/" + p.Name + "] ", namespace: o.OperatorNamespace, pod: p.Name,
			opts: podLogOptions(OperatorContainer, o, -1), keep: keep, tail: tail})
	}
	return streams
}

func podLogOptions(container string, o LogsOptions, tail int64) *corev1.PodLogOptions {
	opts := &corev1.PodLogOptions{Container: container, Follow: o.Follow}
	if tail >= 0 {
		opts.TailLines = &tail
	}
	if o.Since > 0 {
		secs := max(int64(o.Since.Seconds()), 1)
		opts.SinceSeconds = &secs
	}
	return opts
}

// printLogs prints each stream, one after the other, or all at once
// while following; it returns for each stream whether it could be read
// or not.
func (c *Commands) printLogs(ctx context.Context, streams []logStream, follow bool, out, notes io.Writer) []bool {
	w := &lineWriter{w: out}
	read := make([]bool, len(streams))
	each := func(i int) {
		if err := c.copyLog(ctx, streams[i], w); err != nil {
			w.line(notes, fmt.Sprintf("note: %s: %v\n", strings.TrimSpace(streams[i].prefix), err))
			return
		}
		read[i] = true
	}
	if !follow {
		for i := range streams {
			each(i)
		}
		return read
	}
	var wg sync.WaitGroup
	for i := range streams {
		wg.Go(func() { each(i) })
	}
	wg.Wait()
	return read
}

func (c *Commands) copyLog(ctx context.Context, s logStream, w *lineWriter) error {
	open := c.PodLogs
	if open == nil {
		open = c.kubeLogs
	}
	r, err := open(ctx, s.namespace, s.pod, s.opts)
	if err != nil {
		return fmt.Errorf("read the log of %s/%s: %w", s.namespace, s.pod, err)
	}
	defer r.Close()
	var kept []string // only with a tail: the newest kept lines
	br := bufio.NewReader(r)
	for {
		line, err := br.ReadBytes('\n')
		if len(line) > 0 && (s.keep == nil || s.keep(line)) {
			if line[len(line)-1] != '\n' {
				line = append(line, '\n')
			}
			if s.tail < 0 {
				w.line(w.w, s.prefix+string(line))
			} else if s.tail > 0 {
				kept = append(kept, s.prefix+string(line))
				if int64(len(kept)) > s.tail {
					kept = kept[1:]
				}
			}
		}
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return fmt.Errorf("read the log of %s/%s: %w", s.namespace, s.pod, err)
		}
	}
	for _, l := range kept {
		w.line(w.w, l)
	}
	return nil
}

func (c *Commands) kubeLogs(ctx context.Context, namespace, pod string, opts *corev1.PodLogOptions) (io.ReadCloser, error) {
	return c.Kube.CoreV1().Pods(namespace).GetLogs(pod, opts).Stream(ctx)
}

// lineWriter writes whole lines, so that logs followed at once do not
// interleave within a line.
type lineWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lineWriter) line(w io.Writer, s string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	_, _ = io.WriteString(w, s)
}

// byOrdinal orders pod names of one StatefulSet by their ordinal.
func byOrdinal(a, b string) int {
	ordinal := func(s string) int {
		n, _ := strconv.Atoi(s[strings.LastIndex(s, "-")+1:])
		return n
	}
	if d := ordinal(a) - ordinal(b); d != 0 {
		return d
	}
	return strings.Compare(a, b)
}

func (c *cli) logsCommand() *cobra.Command {
	o := LogsOptions{}
	cmd := c.clusterCommand("logs", "The logs of every server of the cluster, each line prefixed by its pod; --operator adds the operator's lines about it",
		func(ctx context.Context, cmds *Commands, cluster string) error {
			o.OperatorNamespace = c.operatorNamespace
			return cmds.Logs(ctx, cluster, o, c.streams.Out, c.streams.ErrOut)
		})
	cmd.Long = "logs prints the log of each server pod of the cluster (container openbao), each line prefixed by [pod]. " +
		"--operator adds the lines of the operator's pods (in --operator-namespace) whose JSON keys namespace and name " +
		"are the cluster's, prefixed by [operator/pod]; a user who may not read the operator's pods gets a note instead."
	f := cmd.Flags()
	f.DurationVar(&o.Since, "since", 0, "only lines newer than this duration (5m, 1h); default all")
	f.Int64Var(&o.Tail, "tail", -1, "the newest lines of each log, -1 for all; for the operator, of its lines about the cluster (not with --follow)")
	f.BoolVarP(&o.Follow, "follow", "f", false, "keep printing new lines until Ctrl-C")
	f.BoolVar(&o.Operator, "operator", false, "also the operator's lines about this cluster")
	return cmd
}
