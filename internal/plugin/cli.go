package plugin

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/openbao/operator/api/v1alpha1"
)

// ErrChecksFailed makes `check` exit non-zero once it printed which
// check failed.
var ErrChecksFailed = errors.New("a check failed")

// cli is what every command shares: kubectl's connection flags
// (--kubeconfig, --context, -n, --as, ...) and the plugin's own.
type cli struct {
	streams           genericiooptions.IOStreams
	kube              *genericclioptions.ConfigFlags
	version           string
	operatorNamespace string
	// isTerminal says whether stdin is a terminal a person answers on;
	// clients, when set, replaces connect's clients (tests).
	isTerminal func(io.Reader) bool
	clients    func() (*Commands, error)
}

// NewRootCommand builds `kubectl openbao` on kubectl's own libraries:
// cobra, and cli-runtime's connection flags. Every command acts with the
// caller's kubeconfig and rights. version is the plugin's release.
func NewRootCommand(streams genericiooptions.IOStreams, version string) *cobra.Command {
	return newRoot(&cli{streams: streams, kube: genericclioptions.NewConfigFlags(true), version: version, isTerminal: isTerminal})
}

func newRoot(c *cli) *cobra.Command {
	streams := c.streams
	root := &cobra.Command{
		Use:   "kubectl-openbao",
		Short: "Operate OpenBao clusters run by the OpenBao operator",
		Long: "kubectl openbao acts with your kubeconfig and your rights, never the operator's, " +
			"and never reads a root token or any other Secret value.",
		SilenceUsage:  true,
		SilenceErrors: true,
		Annotations:   map[string]string{cobra.CommandDisplayNameAnnotation: "kubectl openbao"},
	}
	root.SetIn(streams.In)
	root.SetOut(streams.Out)
	root.SetErr(streams.ErrOut)
	c.kube.AddFlags(root.PersistentFlags())
	root.PersistentFlags().StringVar(&c.operatorNamespace, "operator-namespace", "openbao-operator-system",
		"namespace of the operator (report and logs --operator: its logs; version: its Deployment)")
	root.AddCommand(c.statusCommand(), c.setPausedCommand(true), c.setPausedCommand(false), c.stepDownCommand(),
		c.backupCommand(), c.restoreCommand(), c.resumeUpgradeCommand(), c.restartCommand(), c.rotateCertsCommand(), c.promoteCommand(), c.logsCommand(), c.baoEnvCommand(),
		c.reportCommand(), c.checkCommand(), c.versionCommand())
	return root
}

// connect builds the clients from the caller's kubeconfig and flags, as
// kubectl does.
func (c *cli) connect() (*Commands, error) {
	if c.clients != nil {
		return c.clients()
	}
	cfg, err := c.kube.ToRESTConfig()
	if err != nil {
		return nil, fmt.Errorf("load the kubeconfig: %w", err)
	}
	namespace, _, err := c.kube.ToRawKubeConfigLoader().Namespace()
	if err != nil {
		return nil, fmt.Errorf("read the namespace of the kubeconfig context: %w", err)
	}
	scheme := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(scheme)
	_ = v1alpha1.AddToScheme(scheme)
	cl, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return nil, fmt.Errorf("connect to the API server: %w", err)
	}
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("connect to the API server: %w", err)
	}
	return &Commands{Client: cl, Kube: kube, Namespace: namespace, Now: time.Now, Forwarder: spdyForwarder{config: cfg, kube: kube}}, nil
}

// addOutputFlag gives a read command -o json|yaml.
func addOutputFlag(cmd *cobra.Command, format *string) {
	cmd.Flags().StringVarP(format, "output", "o", "", "output format: json or yaml (default: a table)")
	_ = cmd.RegisterFlagCompletionFunc("output", cobra.FixedCompletions(OutputFormats, cobra.ShellCompDirectiveNoFileComp))
}

// completeCluster completes the first argument with the clusters of the
// namespace.
func (c *cli) completeCluster(cmd *cobra.Command, args []string, _ string) ([]cobra.Completion, cobra.ShellCompDirective) {
	if len(args) > 0 {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	cmds, err := c.connect()
	if err != nil {
		return nil, cobra.ShellCompDirectiveError
	}
	clusters, err := cmds.ListClusters(cmd.Context())
	if err != nil {
		return nil, cobra.ShellCompDirectiveError
	}
	var names []cobra.Completion
	for _, cl := range clusters {
		names = append(names, cl.Name)
	}
	return names, cobra.ShellCompDirectiveNoFileComp
}

// clusterCommand is a command on one cluster: CLUSTER is its only
// argument, completed from the namespace.
func (c *cli) clusterCommand(use, short string, run func(ctx context.Context, cmds *Commands, cluster string) error) *cobra.Command {
	return &cobra.Command{
		Use: use + " CLUSTER", Short: short, Args: cobra.ExactArgs(1), ValidArgsFunction: c.completeCluster,
		RunE: func(cmd *cobra.Command, args []string) error {
			cmds, err := c.connect()
			if err != nil {
				return err
			}
			return run(cmd.Context(), cmds, args[0])
		},
	}
}

func (c *cli) statusCommand() *cobra.Command {
	var format string
	var all bool
	cmd := &cobra.Command{
		Use:   "status [CLUSTER]",
		Short: "A cluster at a glance; without CLUSTER, every cluster of the namespace and whether it holds a root token",
		Long: "status CLUSTER: phase, version, each server's role, seal and Raft state, root token, certificate expiry, " +
			"last backup, conditions. status: every cluster of the namespace (-A: of all namespaces). " +
			"The view role suffices; certificate expiry needs get on the cluster's TLS Secrets and says why when missing.",
		Args: cobra.MaximumNArgs(1), ValidArgsFunction: c.completeCluster,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := CheckOutputFormat(format); err != nil {
				return err
			}
			if all && len(args) == 1 {
				return errors.New("-A lists every cluster: give no CLUSTER with it")
			}
			cmds, err := c.connect()
			if err != nil {
				return err
			}
			if len(args) == 1 {
				return cmds.Status(cmd.Context(), args[0], format, c.streams.Out)
			}
			if all {
				cmds.Namespace = ""
			}
			return cmds.StatusAll(cmd.Context(), format, c.streams.Out)
		},
	}
	addOutputFlag(cmd, &format)
	cmd.Flags().BoolVarP(&all, "all-namespaces", "A", false, "list the clusters of all namespaces")
	return cmd
}

func (c *cli) setPausedCommand(paused bool) *cobra.Command {
	use, short := "resume", "Clear spec.paused: the operator acts on the cluster again"
	if paused {
		use, short = "pause", "Set spec.paused: the operator changes nothing until resume"
	}
	return c.clusterCommand(use, short, func(ctx context.Context, cmds *Commands, cluster string) error {
		if err := cmds.SetPaused(ctx, cluster, paused); err != nil {
			return err
		}
		fmt.Fprintf(c.streams.Out, "openbaocluster %s/%s: spec.paused=%t\n", cmds.Namespace, cluster, paused)
		return nil
	})
}

func (c *cli) stepDownCommand() *cobra.Command {
	return c.clusterCommand("step-down", "Have the operator ask the active server to step down (spec.stepDownRequest; no OpenBao token needed)",
		func(ctx context.Context, cmds *Commands, cluster string) error {
			request, err := cmds.RequestStepDown(ctx, cluster)
			if err != nil {
				return err
			}
			fmt.Fprintf(c.streams.Out, "step-down %s requested; status.stepDown.request shows it once the operator acted\n", request)
			return nil
		})
}

func (c *cli) backupCommand() *cobra.Command {
	return c.clusterCommand("backup", "Create an OpenBaoBackup (an on-demand backup)",
		func(ctx context.Context, cmds *Commands, cluster string) error {
			name, err := cmds.Backup(ctx, cluster)
			if err != nil {
				return err
			}
			fmt.Fprintf(c.streams.Out, "openbaobackup %s/%s created; follow it with: kubectl get openbaobackup -n %s %s -w\n",
				cmds.Namespace, name, cmds.Namespace, name)
			return nil
		})
}

func (c *cli) resumeUpgradeCommand() *cobra.Command {
	return c.clusterCommand("resume-upgrade", "Resume a halted rollout (spec.upgrade.resumeRequest), once its cause is fixed",
		func(ctx context.Context, cmds *Commands, cluster string) error {
			request, halted, err := cmds.ResumeUpgrade(ctx, cluster)
			if err != nil {
				return err
			}
			fmt.Fprintf(c.streams.Out, "openbaocluster %s/%s: spec.upgrade.resumeRequest=%s; the rollout halted on %s resumes "+
				"(kubectl openbao status %s shows its progress)\n", cmds.Namespace, cluster, request, halted, cluster)
			return nil
		})
}

// waitFlags are a request command's --wait and --timeout.
type waitFlags struct {
	wait    bool
	timeout time.Duration
}

func (w *waitFlags) add(cmd *cobra.Command, until string, timeout time.Duration) *cobra.Command {
	cmd.Flags().BoolVar(&w.wait, "wait", false, "wait until "+until)
	cmd.Flags().DurationVar(&w.timeout, "timeout", timeout, "how long --wait waits")
	return cmd
}

func (c *cli) restartCommand() *cobra.Command {
	var w waitFlags
	cmd := c.clusterCommand("restart", "Restart every server once through the Raft-aware rollout (spec.restartRequest): "+
		"one at a time, the active one last",
		func(ctx context.Context, cmds *Commands, cluster string) error {
			request, err := cmds.RequestRestart(ctx, cluster)
			if err != nil {
				return err
			}
			fmt.Fprintf(c.streams.Out, "openbaocluster %s/%s: spec.restartRequest=%s; every server restarts through the rollout, "+
				"one at a time, the active one last (kubectl openbao status %s shows its progress)\n", cmds.Namespace, cluster, request, cluster)
			if !w.wait {
				return nil
			}
			err = cmds.WaitFor(ctx, cluster, "status.restart.completedTime", w.timeout,
				func(cl *v1alpha1.OpenBaoCluster) bool { return RestartDone(cl, request) })
			if err != nil {
				return err
			}
			fmt.Fprintf(c.streams.Out, "restart %s complete: every server runs the restarted template\n", request)
			return nil
		})
	return w.add(cmd, "every server restarted (status.restart.completedTime)", 30*time.Minute)
}

func (c *cli) rotateCertsCommand() *cobra.Command {
	var w waitFlags
	cmd := c.clusterCommand("rotate-certs", "Reissue the operator-issued server certificate now (spec.tls.rotateRequest); "+
		"the servers reload it without a restart. The CA keeps its own schedule",
		func(ctx context.Context, cmds *Commands, cluster string) error {
			request, err := cmds.RequestCertRotation(ctx, cluster)
			if err != nil {
				return err
			}
			fmt.Fprintf(c.streams.Out, "openbaocluster %s/%s: spec.tls.rotateRequest=%s; the operator reissues the server certificate "+
				"and the servers reload it without a restart\n", cmds.Namespace, cluster, request)
			if !w.wait {
				return nil
			}
			err = cmds.WaitFor(ctx, cluster, "status.tls.rotateRequest", w.timeout,
				func(cl *v1alpha1.OpenBaoCluster) bool { return RotationDone(cl, request) })
			if err != nil {
				return err
			}
			fmt.Fprintf(c.streams.Out, "rotation %s done: the server certificate was reissued (status.tls.rotatedAt)\n", request)
			return nil
		})
	return w.add(cmd, "the certificate is reissued (status.tls.rotateRequest)", 5*time.Minute)
}

func (c *cli) reportCommand() *cobra.Command {
	var file, misused string
	var logLines int64
	cmd := c.clusterCommand("report", "Write a support bundle (tar.gz) without any Secret value",
		func(ctx context.Context, cmds *Commands, cluster string) error {
			return c.writeReport(ctx, cmds, cluster, file, logLines)
		})
	// -o named the file in earlier releases: say what replaced it.
	cmd.PreRunE = func(*cobra.Command, []string) error {
		if misused != "" {
			return fmt.Errorf("report writes a tar.gz: name it with --file %s (-o is the output format of reads)", misused)
		}
		return nil
	}
	cmd.Flags().StringVar(&file, "file", "", "file to write (default openbao-report-<namespace>-<cluster>.tar.gz); never overwritten")
	cmd.Flags().Int64Var(&logLines, "log-lines", 5000, "newest lines of each operator log to keep")
	cmd.Flags().StringVarP(&misused, "output", "o", "", "")
	_ = cmd.Flags().MarkHidden("output")
	return cmd
}

func (c *cli) writeReport(ctx context.Context, cmds *Commands, cluster, path string, logLines int64) error {
	if path == "" {
		path = fmt.Sprintf("openbao-report-%s-%s.tar.gz", cmds.Namespace, cluster)
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return fmt.Errorf("create the report file: %w", err)
	}
	defer f.Close()
	err = cmds.Report(ctx, cluster, ReportOptions{
		OperatorNamespace: c.operatorNamespace, LogLines: logLines, OperatorSelector: OperatorSelector,
	}, f)
	if err != nil {
		return err
	}
	fmt.Fprintf(c.streams.Out, "report written to %s (Secrets listed by name and keys only)\n", path)
	return f.Close()
}

func (c *cli) checkCommand() *cobra.Command {
	var format string
	cmd := &cobra.Command{
		Use:   "check",
		Short: "Check that the API server serves the operator's CRDs and that its webhook answers",
		Long: "check asks discovery for the operator's kinds, and dry-runs the create of a cluster that only the " +
			"operator's webhook refuses, in the namespace (-n): OK only when the webhook itself refused it. " +
			"Nothing is stored. It exits non-zero when a check fails.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := CheckOutputFormat(format); err != nil {
				return err
			}
			cmds, err := c.connect()
			if err != nil {
				return err
			}
			report := cmds.Check(cmd.Context())
			if err := Print(c.streams.Out, format, report, func(w io.Writer) error { return WriteChecks(w, report) }); err != nil {
				return err
			}
			if report.Failed() {
				return ErrChecksFailed
			}
			return nil
		},
	}
	addOutputFlag(cmd, &format)
	return cmd
}

func (c *cli) versionCommand() *cobra.Command {
	var format string
	cmd := &cobra.Command{
		Use:   "version",
		Short: "The plugin's release and, when you may read its Deployment, the operator's",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := CheckOutputFormat(format); err != nil {
				return err
			}
			v := VersionView{Plugin: c.version, Operator: "unknown"}
			if cmds, err := c.connect(); err != nil {
				v.Unknown = err.Error()
			} else {
				v = cmds.Version(cmd.Context(), c.version, c.operatorNamespace)
			}
			return Print(c.streams.Out, format, v, func(w io.Writer) error { return WriteVersion(w, v) })
		},
	}
	addOutputFlag(cmd, &format)
	return cmd
}
