package e2e_test

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/openbao/operator/internal/bootstrap"
	"github.com/openbao/operator/test/localnode"
)

// formationBound is how long a run may take to reach 3 voters before the
// benchmark fails: ten times the slowest floor measured so far.
const formationBound = 3 * time.Minute

// benchCluster names the cluster of every run: dnsName and raftVoters
// assume "bao".
const benchCluster = "bao"

// formationVariant is one way of taking three bao processes to 3 voters.
type formationVariant struct {
	name string // in the timelines and, prefixed with "s-", as the metric
	run  func(ctx context.Context, b *testing.B, r *benchRun)
}

// formationVariants are run in this order in every round, so that drift
// of the node (caches, background load) hits each alike.
var formationVariants = []formationVariant{
	{"floor-defaults", func(ctx context.Context, b *testing.B, r *benchRun) { runBareScript(ctx, b, r, bareScript{}) }},
	{"floor-tuned", func(ctx context.Context, b *testing.B, r *benchRun) {
		runBareScript(ctx, b, r, bareScript{tuned: true})
	}},
	{"floor-tuned-gated", func(ctx context.Context, b *testing.B, r *benchRun) {
		runBareScript(ctx, b, r, bareScript{tuned: true, gated: true})
	}},
	{"operator", runOperator},
}

// BenchmarkTimeToThreeVoters measures "CR created → 3 Raft voters" for the
// operator next to the floor: the same objects applied by a bare script
// that initializes pod-0 itself, with OpenBao's default timers and with the
// operator's, and the gated floor that also starts the joiners only after
// initialization, as the operator does. b.N is ignored: one round takes about a minute, and the
// number of rounds comes from BOOTSTRAP_BENCH_RUNS (default 3).
func BenchmarkTimeToThreeVoters(b *testing.B) {
	cl := installOperator(b)
	ctx := context.Background()
	image := wrapperImage(ctx, b, cl)
	runs := benchRuns(b)
	results := map[string][]time.Duration{}
	for round := 1; round <= runs; round++ {
		for _, v := range formationVariants {
			results[v.name] = append(results[v.name], runOnce(ctx, b, cl, image, v, round))
		}
	}
	reportFormation(b, runs, results)
}

func benchRuns(b *testing.B) int {
	s := os.Getenv("BOOTSTRAP_BENCH_RUNS")
	if s == "" {
		return 3
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 {
		b.Fatalf("BOOTSTRAP_BENCH_RUNS=%q: want a positive number of runs", s)
	}
	return n
}

// wrapperImage is the running manager's WRAPPER_IMAGE, which the operator
// hands to its clusters for the bao-wrapper init container.
func wrapperImage(ctx context.Context, b *testing.B, cl client.Client) string {
	for _, c := range managerPod(ctx, b, cl).Spec.Containers {
		if c.Name != localnode.ManagerContainer {
			continue
		}
		for _, e := range c.Env {
			if e.Name == "WRAPPER_IMAGE" && e.Value != "" {
				return e.Value
			}
		}
	}
	b.Fatalf("the manager pod's container %s has no WRAPPER_IMAGE", localnode.ManagerContainer)
	return ""
}

// benchRun is one run of one variant in a namespace of its own.
type benchRun struct {
	cl           client.Client
	ns           string
	wrapperImage string
	tl           *timeline
	deadline     time.Time // formationBound after the start
	stopOnce     sync.Once
	stop         func()
}

// begin starts the run's clock and its pod poller. Variants call it right
// before their first write, after everything that needs no API server.
func (r *benchRun) begin(probe func(context.Context)) {
	r.tl.start = time.Now()
	r.deadline = r.tl.start.Add(formationBound)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		watchPods(ctx, r.cl, r.ns, r.tl, probe)
	}()
	r.stop = func() { cancel(); <-done }
}

func (r *benchRun) end() {
	r.stopOnce.Do(func() {
		if r.stop != nil {
			r.stop()
		}
	})
}

// runOnce runs one variant in a fresh namespace, logs its timeline and
// returns the time to 3 voters. The namespace is gone when it returns, so
// that no run shares the 2-core node with the last one's shutdown.
func runOnce(ctx context.Context, b *testing.B, cl client.Client, image string, v formationVariant, round int) time.Duration {
	r := &benchRun{cl: cl, ns: createNamespace(ctx, b, cl, "bench-"+v.name), wrapperImage: image, tl: &timeline{}}
	defer deleteNamespace(ctx, b, cl, r.ns)
	defer func() {
		r.end()
		if b.Failed() {
			b.Logf("%s run %d in %s failed; timeline so far: %s", v.name, round, r.ns, r.tl)
		}
	}()
	v.run(ctx, b, r)
	r.end()
	b.Logf("%s run %d: %s", v.name, round, r.tl)
	d, _ := r.tl.at("3 voters")
	return d
}

// deleteNamespace deletes a test's namespace and waits until it is gone,
// and with it the volumes its claims released: the host-path provisioner
// deletes those afterwards, in the controller that binds the next run's
// claims.
func deleteNamespace(ctx context.Context, t testing.TB, cl client.Client, name string) {
	start := time.Now()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if err := cl.Delete(ctx, ns); client.IgnoreNotFound(err) != nil {
		t.Fatalf("delete namespace %s: %v", name, err)
	}
	// Servers that all stop at once lose their quorum and wait out their
	// grace period: the test is over, so they are stopped at once.
	if err := cl.DeleteAllOf(ctx, &corev1.Pod{}, client.InNamespace(name), client.GracePeriodSeconds(0)); client.IgnoreNotFound(err) != nil {
		t.Fatalf("stop the pods of %s: %v", name, err)
	}
	// Four minutes: finalizers wait for the operator, which a parallel test
	// may have killed (each kill costs it a lease expiry).
	waitFor(ctx, t, 4*time.Minute, "namespace "+name+" to be gone", func() (bool, string) {
		err := cl.Get(ctx, client.ObjectKey{Name: name}, ns)
		var why []string
		for _, c := range ns.Status.Conditions {
			if c.Status == corev1.ConditionTrue {
				why = append(why, c.Message)
			}
		}
		return apierrors.IsNotFound(err), fmt.Sprintf("phase %s %v (%v)", ns.Status.Phase, why, err)
	})
	waitFor(ctx, t, 2*time.Minute, "the volumes of "+name+" to be gone", func() (bool, string) {
		var pvs corev1.PersistentVolumeList
		if err := cl.List(ctx, &pvs); err != nil {
			return false, err.Error()
		}
		left := 0
		for _, pv := range pvs.Items {
			if pv.Spec.ClaimRef != nil && pv.Spec.ClaimRef.Namespace == name {
				left++
			}
		}
		return left == 0, fmt.Sprintf("%d left", left)
	})
	logf("namespace %s and its volumes gone %s after its deletion", name, time.Since(start).Round(100*time.Millisecond))
}

// runOperator creates the cluster and lets the operator alone take it to
// 3 voters; the benchmark reads the root token the operator stored.
func runOperator(ctx context.Context, b *testing.B, r *benchRun) {
	cluster := clusterObject(b, r.ns, benchCluster, nil)
	r.begin(func(ctx context.Context) { markStatusInitialized(ctx, r) })
	if err := r.cl.Create(ctx, cluster); err != nil {
		b.Fatalf("create OpenBaoCluster: %v", err)
	}
	name := benchCluster + "-root-token"
	waitFor(ctx, b, time.Until(r.deadline), "Secret "+name, func() (bool, string) {
		err := r.cl.Get(ctx, client.ObjectKey{Namespace: r.ns, Name: name}, &corev1.Secret{})
		return err == nil, fmt.Sprint(err)
	})
	r.tl.mark("root token stored")
	token := string(secretData(ctx, b, r.cl, r.ns, name, bootstrap.RootTokenDataKey))
	caPEM := secretData(ctx, b, r.cl, r.ns, benchCluster+"-tls-ca", "ca.crt")
	waitVoters(ctx, b, r, serverPods(ctx, b, r.cl, r.ns, 1)[0], caPEM, token)
}

// markStatusInitialized is the operator run's probe: when the operator
// is about to call sys/init (it records initializationStarted first) and
// when it recorded the initialization are not on any pod.
func markStatusInitialized(ctx context.Context, r *benchRun) {
	u := &unstructured.Unstructured{}
	u.SetAPIVersion("openbao.org/v1alpha1")
	u.SetKind("OpenBaoCluster")
	if err := r.cl.Get(ctx, client.ObjectKey{Namespace: r.ns, Name: benchCluster}, u); err != nil {
		return
	}
	if started, _, _ := unstructured.NestedString(u.Object, "status", "initializationStarted"); started != "" {
		r.tl.mark("init started")
	}
	if done, _, _ := unstructured.NestedBool(u.Object, "status", "initialized"); done {
		r.tl.mark("status.initialized")
	}
}

// waitVoters polls the Raft configuration through pod-0 every 200 ms
// until it lists 3 voters, marking when it first lists 3 servers. The run
// must then end with exactly the 3 servers, all voting.
func waitVoters(ctx context.Context, b *testing.B, r *benchRun, pod0 corev1.Pod, caPEM []byte, token string) {
	what := fmt.Sprintf("%d Raft voters within %s of the start", replicas, formationBound)
	waitFor(ctx, b, time.Until(r.deadline), what, func() (bool, string) {
		servers, voters, err := raftMembers(pod0, r.ns, caPEM, token)
		if err != nil {
			return false, err.Error()
		}
		if len(servers) >= replicas {
			r.tl.mark("3 servers")
		}
		if len(voters) >= replicas {
			r.tl.mark("3 voters")
			return true, ""
		}
		return false, fmt.Sprintf("servers %v, voters %v", servers, voters)
	})
	servers, voters, err := raftMembers(pod0, r.ns, caPEM, token)
	if err != nil || len(servers) != replicas || len(voters) != replicas {
		b.Fatalf("%s ends with servers %v and voters %v (%v); want %d servers, all voting", r.ns, servers, voters, err, replicas)
	}
}

// reportFormation reports the medians as metrics and logs min, median and
// max of each variant.
func reportFormation(b *testing.B, runs int, results map[string][]time.Duration) {
	medians := map[string]float64{}
	var parts []string
	for _, v := range formationVariants {
		s := slices.Clone(results[v.name])
		slices.Sort(s)
		medians[v.name] = median(s).Seconds()
		b.ReportMetric(medians[v.name], "s-"+v.name)
		parts = append(parts, fmt.Sprintf("%s %.1f/%.1f/%.1fs", v.name, s[0].Seconds(), medians[v.name], s[len(s)-1].Seconds()))
	}
	ratio := medians["operator"] / medians["floor-tuned"]
	b.ReportMetric(ratio, "x-tuned-floor")
	gated := medians["operator"] / medians["floor-tuned-gated"]
	b.ReportMetric(gated, "x-gated-floor")
	b.ReportMetric(0, "ns/op") // the whole benchmark's wall time, namespace deletions included: meaningless
	b.Logf("to 3 voters, min/median/max over %d runs each: %s; operator/tuned floor %.2fx, operator/gated floor %.2fx",
		runs, strings.Join(parts, ", "), ratio, gated)
}

// median of sorted durations.
func median(s []time.Duration) time.Duration {
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}
