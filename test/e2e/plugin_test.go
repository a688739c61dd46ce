package e2e_test

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/openbao/operator/internal/images"
)

// pluginStatusAndReport runs the kubectl-openbao binary as a user would,
// with the node's kubeconfig, against a formed 3-server cluster: status
// must name the active server and three Raft voters with the
// certificate's expiry; the support bundle report writes must carry the
// operator's logs and no value of any Secret of the namespace.
func pluginStatusAndReport(ctx context.Context, t *testing.T, cl client.Client, ns string) {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "kubectl-openbao")
	if err := images.GoBuild(node.RepoRoot, "./cmd/kubectl-openbao", bin); err != nil {
		t.Fatal(err)
	}
	var status string
	waitFor(ctx, t, 2*time.Minute, "kubectl openbao status to show the leader and 3 voters", func() (bool, string) {
		status = runPlugin(t, bin, "status", "bao", "-n", ns)
		roles := serverRoles(status)
		return roles["leader"] == 1 && roles["leader"]+roles["voter"] == replicas && roles["active"] == 1, status
	})
	if !strings.Contains(status, "Certificate (server):") || strings.Contains(status, "Certificate (server):  -") {
		t.Errorf("status shows no server certificate expiry:\n%s", status)
	}
	logf("kubectl openbao status:\n%s", status)

	out := filepath.Join(t.TempDir(), "report.tar.gz")
	runPlugin(t, bin, "report", "bao", "-n", ns, "--file", out)
	files := untar(t, out)
	var operatorLogs int
	for name := range files {
		if strings.Contains(name, "log") && strings.Contains(name, "operator") {
			operatorLogs++
		}
	}
	if operatorLogs == 0 {
		t.Errorf("the report holds no operator log; files: %v", slices.Sorted(maps.Keys(files)))
	}
	for what, forms := range secretValues(ctx, t, cl, ns) {
		for name, data := range files {
			for _, form := range forms {
				if bytes.Contains(data, []byte(form)) {
					t.Errorf("%s is in the report's %s", what, name)
				}
			}
		}
	}
	logf("kubectl openbao report: %d files, %d operator logs, no Secret value", len(files), operatorLogs)
}

// serverRoles counts the roles in status's server table (SERVER ROLE
// SEALED READY RAFT ...): active or standby, and leader or voter.
func serverRoles(status string) map[string]int {
	roles := map[string]int{}
	for _, line := range strings.Split(status, "\n") {
		if f := strings.Fields(line); len(f) >= 5 && strings.HasPrefix(f[0], "bao-") {
			roles[f[1]]++
			roles[f[4]]++
		}
	}
	return roles
}

// runPlugin runs the plugin with the node's kubeconfig and returns its
// output; a failure fails the test.
func runPlugin(t *testing.T, bin string, args ...string) string {
	t.Helper()
	cmd := exec.Command(bin, append(args, "--kubeconfig", node.Kubeconfig())...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("kubectl-openbao %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

func untar(t *testing.T, path string) map[string][]byte {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	gz, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	files := map[string][]byte{}
	tr := tar.NewReader(gz)
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			return files
		}
		if err != nil {
			t.Fatal(err)
		}
		if files[hdr.Name], err = io.ReadAll(tr); err != nil {
			t.Fatal(err)
		}
	}
}
