// Command kubectl-openbao is the kubectl plugin of the OpenBao operator:
// `kubectl openbao status|pause|resume|backup|report <cluster>`. It acts
// with the caller's kubeconfig and rights and never reads the root token.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/openbao/operator/api/v1alpha1"
	"github.com/openbao/operator/internal/plugin"
)

const usage = `Usage: kubectl openbao <command> <cluster> [flags]

Commands:
  status <cluster>   phase, version, each server's role, seal and Raft state,
                     root token, certificate expiry, last backup, conditions
  status             every cluster of the namespace (-A: of all namespaces)
                     and whether it still holds a root token
  pause <cluster>    set spec.paused: the operator changes nothing until resume
  resume <cluster>   clear spec.paused
  step-down <cluster>
                     have the operator ask the active server to step down
                     (writes spec.stepDownRequest; no OpenBao token needed)
  backup <cluster>   create an OpenBaoBackup (an on-demand backup)
  report <cluster>   write a support bundle (tar.gz) without any Secret value

Flags:
`

func main() {
	if err := run(context.Background(), os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}
}

type options struct {
	kubeconfig, context, namespace string
	output, operatorNamespace      string
	logLines                       int64
	allNamespaces                  bool
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	o := options{}
	fs := flag.NewFlagSet("kubectl-openbao", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, usage); fs.PrintDefaults() }
	fs.StringVar(&o.kubeconfig, "kubeconfig", "", "path to the kubeconfig (default: KUBECONFIG or ~/.kube/config)")
	fs.StringVar(&o.context, "context", "", "kubeconfig context to use")
	fs.StringVar(&o.namespace, "n", "", "namespace of the cluster (default: the context's)")
	fs.StringVar(&o.namespace, "namespace", "", "namespace of the cluster (default: the context's)")
	fs.StringVar(&o.output, "o", "", "report: file to write (default openbao-report-<namespace>-<cluster>.tar.gz)")
	fs.StringVar(&o.operatorNamespace, "operator-namespace", "openbao-operator-system", "report: namespace of the operator, for its logs")
	fs.BoolVar(&o.allNamespaces, "A", false, "status without a cluster: list the clusters of all namespaces")
	fs.Int64Var(&o.logLines, "log-lines", 5000, "report: newest lines of each operator log to keep")
	positional, err := parseInterleaved(fs, args)
	if err != nil {
		return err
	}
	if len(positional) == 1 && positional[0] == "status" {
		cmds, err := connect(o)
		if err != nil {
			return err
		}
		if o.allNamespaces {
			cmds.Namespace = ""
		}
		return cmds.StatusAll(ctx, stdout)
	}
	if len(positional) != 2 {
		fs.Usage()
		return errors.New("want a command and a cluster name")
	}
	cmds, err := connect(o)
	if err != nil {
		return err
	}
	return dispatch(ctx, cmds, o, positional[0], positional[1], stdout)
}

// parseInterleaved accepts flags before, between and after the positional
// arguments, as kubectl users type them (`status bao -n prod`).
func parseInterleaved(fs *flag.FlagSet, args []string) ([]string, error) {
	var positional []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		if fs.NArg() == 0 {
			return positional, nil
		}
		positional = append(positional, fs.Arg(0))
		args = fs.Args()[1:]
	}
}

func dispatch(ctx context.Context, cmds *plugin.Commands, o options, command, cluster string, stdout io.Writer) error {
	switch command {
	case "status":
		return cmds.Status(ctx, cluster, stdout)
	case "pause", "resume":
		if err := cmds.SetPaused(ctx, cluster, command == "pause"); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "openbaocluster %s/%s: spec.paused=%t\n", cmds.Namespace, cluster, command == "pause")
		return nil
	case "step-down":
		request, err := cmds.RequestStepDown(ctx, cluster)
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "step-down %s requested; status.stepDown.request shows it once the operator acted\n", request)
		return nil
	case "backup":
		name, err := cmds.Backup(ctx, cluster)
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "openbaobackup %s/%s created; follow it with: kubectl get openbaobackup -n %s %s -w\n",
			cmds.Namespace, name, cmds.Namespace, name)
		return nil
	case "report":
		return writeReport(ctx, cmds, o, cluster, stdout)
	default:
		return fmt.Errorf("unknown command %q (want status, pause, resume, step-down, backup or report)", command)
	}
}

func writeReport(ctx context.Context, cmds *plugin.Commands, o options, cluster string, stdout io.Writer) error {
	path := o.output
	if path == "" {
		path = fmt.Sprintf("openbao-report-%s-%s.tar.gz", cmds.Namespace, cluster)
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return fmt.Errorf("create the report file: %w", err)
	}
	defer f.Close()
	err = cmds.Report(ctx, cluster, plugin.ReportOptions{
		OperatorNamespace: o.operatorNamespace, LogLines: o.logLines,
		OperatorSelector: map[string]string{"app.kubernetes.io/name": "openbao-operator"},
	}, f)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "report written to %s (Secrets listed by name and keys only)\n", path)
	return f.Close()
}

// connect builds the clients from the caller's kubeconfig, as kubectl does.
func connect(o options) (*plugin.Commands, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = o.kubeconfig
	loader := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules,
		&clientcmd.ConfigOverrides{CurrentContext: o.context, Context: clientcmdContext(o.namespace)})
	cfg, err := loader.ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("load the kubeconfig: %w", err)
	}
	namespace, _, err := loader.Namespace()
	if err != nil {
		return nil, fmt.Errorf("read the namespace of the kubeconfig context: %w", err)
	}
	scheme := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(scheme)
	_ = v1alpha1.AddToScheme(scheme)
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return nil, fmt.Errorf("connect to the API server: %w", err)
	}
	logs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("connect to the API server: %w", err)
	}
	return &plugin.Commands{Client: c, Logs: logs, Namespace: namespace, Now: time.Now}, nil
}

func clientcmdContext(namespace string) clientcmdapi.Context {
	return clientcmdapi.Context{Namespace: namespace}
}
