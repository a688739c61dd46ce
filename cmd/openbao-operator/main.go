// Command openbao-operator runs the OpenBao operator's controller manager;
// as `openbao-operator render -f cluster.yaml` it prints the objects the
// operator would apply for an OpenBaoCluster, and as `openbao-operator
// backup ...` and `openbao-operator restore ...` it is the executor of a
// backup or restore Job; as `openbao-operator provisioner` it is the
// OpenBaoTenant provisioner; `openbao-operator --version` prints the release.
package main

import (
	"fmt"
	"os"

	// The release image is distroless: no CA bundle on disk. The executor
	// reaches public object stores (S3, GCS, Azure) over TLS, so the Mozilla
	// roots are compiled in, used only when the system has none.
	_ "golang.org/x/crypto/x509roots/fallback"

	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"

	operator "github.com/openbao/operator"
	"github.com/openbao/operator/api/v1alpha1"
	helmcharts "github.com/openbao/operator/helm-charts"
	"github.com/openbao/operator/internal/values"
	"github.com/openbao/operator/internal/watches"
)

// version is the release, stamped by the release build
// (-ldflags -X main.version=...).
var version = "dev"

func main() {
	var err error
	switch {
	case len(os.Args) > 1 && (os.Args[1] == "--version" || os.Args[1] == "version"):
		fmt.Println(version)
	case len(os.Args) > 1 && os.Args[1] == "render":
		err = runRender(os.Args[2:], os.Stdout)
	case len(os.Args) > 1 && os.Args[1] == "backup":
		err = runBackup(os.Args[2:], os.Stderr)
	case len(os.Args) > 1 && os.Args[1] == "restore":
		err = runRestore(os.Args[2:], os.Stderr)
	case len(os.Args) > 1 && os.Args[1] == "provisioner":
		err = runProvisioner(os.Args[2:])
	default:
		err = runManager(os.Args[1:])
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "openbao-operator: %v\n", err)
		os.Exit(1)
	}
}

func newScheme() *runtime.Scheme {
	scheme := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(scheme))
	utilruntime.Must(v1alpha1.AddToScheme(scheme))
	return scheme
}

// loadWatches reads watches.yaml (the embedded one when path is empty) and
// rejects overrides of values the operator owns.
func loadWatches(path string) (watches.Settings, error) {
	data := operator.DefaultWatches
	if path != "" {
		var err error
		if data, err = os.ReadFile(path); err != nil {
			return watches.Settings{}, fmt.Errorf("read watches file: %w", err)
		}
	}
	gvk := v1alpha1.GroupVersion.WithKind("OpenBaoCluster")
	settings, err := watches.Load(data, gvk, "helm-charts/"+helmcharts.OpenBaoClusterDir, os.Getenv)
	if err != nil {
		return watches.Settings{}, err
	}
	if err := values.CheckOverrideValues(settings.OverrideValues); err != nil {
		return watches.Settings{}, fmt.Errorf("watches file: %w", err)
	}
	return settings, nil
}
