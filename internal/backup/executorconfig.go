package backup

import (
	"cmp"
	"errors"
	"flag"
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/openbao/operator/internal/identity"
)

// Authentication methods of the executor.
const (
	AuthJWT   = "jwt"
	AuthToken = "token"
)

// OperatorAuthMount is the JWT auth mount of the operator's identity in
// OpenBao (internal/identity sets it up); its role "backup" is the backup
// Jobs'.
const (
	OperatorAuthMount = identity.Mount
	DefaultBackupRole = identity.BackupRole
)

// ExecutorConfig is everything the executor is told, as command-line
// flags of `openbao-operator backup`: names, addresses and file paths,
// never a secret value.
type ExecutorConfig struct {
	Namespace, Cluster, Backup string

	// OpenBaoAddress is the client Service's URL (its internal listener's
	// port with ACME); OpenBaoCAFile verifies it (empty: the system roots).
	OpenBaoAddress string
	OpenBaoCAFile  string
	// ServerDomain is the domain of the servers' own names
	// (<headless>.<namespace>.svc): the token is sent to the leader only
	// when its address is there, or is OpenBaoAddress's host.
	ServerDomain string

	// Auth is AuthJWT (JWTFile's service-account token, at
	// auth/<JWTMount>/login as JWTRole) or AuthToken (TokenFile).
	Auth      string
	JWTMount  string
	JWTRole   string
	JWTFile   string
	TokenFile string

	// The object store; Provider is S3 when empty.
	Provider       string
	Endpoint       string
	Bucket         string
	Region         string
	PathStyle      bool
	StoreCAFile    string
	CredentialsDir string
	PathPrefix     string

	// Timeout bounds the whole run; PartSize and Concurrency bound its
	// memory (about PartSize × Concurrency).
	Timeout     time.Duration
	PartSize    int64
	Concurrency int

	// Retention, when set, is applied by the executor right after its
	// verified upload, under the cluster's prefix, never to the object just
	// written, and reported in Report.Retention. The operator sets it only
	// when WhoRetains says RetentionByExecutor: the target names no
	// credentials, so only the Job's own identity may reach the store.
	Retention Retention

	// ProvenanceKeyFile holds the cluster's provenance key (Prover): the
	// backup signs the names it gives with it, and latest and retention
	// consider only names it proves. For a restore it may be absent (the
	// source's Secret is gone): then no name is proven.
	ProvenanceKeyFile string

	// TerminationLog receives the Report.
	TerminationLog string
}

// Defaults of the executor.
const (
	DefaultPartSize    = 8 << 20
	DefaultConcurrency = 2
	DefaultTimeout     = time.Hour
)

// Args writes the configuration as the backup subcommand and its flags.
func (c ExecutorConfig) Args() []string { return append([]string{"backup"}, c.Flags()...) }

// Flags writes the configuration as flags, in a fixed order.
func (c ExecutorConfig) Flags() []string {
	var args []string
	add := func(name, value string) {
		if value != "" {
			args = append(args, "--"+name+"="+value)
		}
	}
	add("namespace", c.Namespace)
	add("cluster", c.Cluster)
	add("backup", c.Backup)
	add("openbao-address", c.OpenBaoAddress)
	add("openbao-ca-file", c.OpenBaoCAFile)
	add("server-domain", c.ServerDomain)
	add("auth", c.Auth)
	add("jwt-mount", c.JWTMount)
	add("jwt-role", c.JWTRole)
	add("jwt-file", c.JWTFile)
	add("token-file", c.TokenFile)
	if c.Provider != "" && c.Provider != ProviderS3 {
		add("provider", c.Provider)
	}
	add("endpoint", c.Endpoint)
	add("bucket", c.Bucket)
	add("region", c.Region)
	if c.PathStyle {
		add("path-style", "true")
	}
	add("store-ca-file", c.StoreCAFile)
	add("credentials-dir", c.CredentialsDir)
	add("path-prefix", c.PathPrefix)
	if c.Timeout > 0 {
		add("timeout", c.Timeout.String())
	}
	if c.PartSize > 0 {
		add("part-size", strconv.FormatInt(c.PartSize, 10))
	}
	if c.Concurrency > 0 {
		add("concurrency", strconv.Itoa(c.Concurrency))
	}
	if c.Retention.MaxCount > 0 {
		add("retention-max-count", strconv.Itoa(c.Retention.MaxCount))
	}
	if c.Retention.MaxAge > 0 {
		add("retention-max-age", c.Retention.MaxAge.String())
	}
	add("provenance-key-file", c.ProvenanceKeyFile)
	add("termination-log", c.TerminationLog)
	return args
}

// ParseExecutorArgs reads the flags after "backup".
func ParseExecutorArgs(args []string, output io.Writer) (ExecutorConfig, error) {
	c := ExecutorConfig{}
	fs := flag.NewFlagSet("openbao-operator backup", flag.ContinueOnError)
	fs.SetOutput(output)
	c.Register(fs)
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	return c, c.Complete()
}

// Register defines the flags of the configuration on fs; the restore
// executor shares them.
func (c *ExecutorConfig) Register(fs *flag.FlagSet) {
	fs.StringVar(&c.Namespace, "namespace", "", "namespace of the OpenBaoCluster")
	fs.StringVar(&c.Cluster, "cluster", "", "name of the OpenBaoCluster")
	fs.StringVar(&c.Backup, "backup", "", "name of the OpenBaoBackup (for the object's metadata)")
	fs.StringVar(&c.OpenBaoAddress, "openbao-address", "", "URL of the cluster's client Service")
	fs.StringVar(&c.OpenBaoCAFile, "openbao-ca-file", "", "PEM CA bundle verifying OpenBao (empty: system roots)")
	fs.StringVar(&c.ServerDomain, "server-domain", "", "domain of the servers' names; the leader must be there")
	fs.StringVar(&c.Auth, "auth", AuthJWT, "jwt or token")
	fs.StringVar(&c.JWTMount, "jwt-mount", "", "JWT auth mount (default "+OperatorAuthMount+")")
	fs.StringVar(&c.JWTRole, "jwt-role", "", "JWT auth role (default "+DefaultBackupRole+")")
	fs.StringVar(&c.JWTFile, "jwt-file", "", "file of the projected service-account token")
	fs.StringVar(&c.TokenFile, "token-file", "", "file of the OpenBao token")
	fs.StringVar(&c.Provider, "provider", ProviderS3, "object store provider: S3, GCS or Azure")
	fs.StringVar(&c.Endpoint, "endpoint", "", "object store URL (required for S3)")
	fs.StringVar(&c.Bucket, "bucket", "", "bucket")
	fs.StringVar(&c.Region, "region", "", "bucket region")
	fs.BoolVar(&c.PathStyle, "path-style", false, "path-style addressing")
	fs.StringVar(&c.StoreCAFile, "store-ca-file", "", "PEM CA bundle verifying the object store")
	fs.StringVar(&c.CredentialsDir, "credentials-dir", "", "directory of the credentials Secret's files (keys by provider)")
	fs.StringVar(&c.PathPrefix, "path-prefix", "", "prefix of object keys")
	fs.DurationVar(&c.Timeout, "timeout", DefaultTimeout, "bound of the whole run")
	fs.Int64Var(&c.PartSize, "part-size", DefaultPartSize, "bytes per uploaded part")
	fs.IntVar(&c.Concurrency, "concurrency", DefaultConcurrency, "parts buffered and uploaded at once")
	fs.IntVar(&c.Retention.MaxCount, "retention-max-count", 0, "after the upload, keep this many newest snapshots (0: no bound)")
	fs.DurationVar(&c.Retention.MaxAge, "retention-max-age", 0, "after the upload, delete snapshots older than this (0: no bound)")
	fs.StringVar(&c.ProvenanceKeyFile, "provenance-key-file", "", "file of the cluster's provenance key, which signs and proves snapshot names")
	fs.StringVar(&c.TerminationLog, "termination-log", TerminationLog, "file the report is written to")
}

// Complete fills the defaults of the JWT login and checks the flags.
func (c *ExecutorConfig) Complete() error {
	if c.Auth == AuthJWT {
		c.JWTMount = cmp.Or(c.JWTMount, OperatorAuthMount)
		c.JWTRole = cmp.Or(c.JWTRole, DefaultBackupRole)
	}
	return c.validate()
}

func (c ExecutorConfig) validate() error {
	var missing []string
	for _, f := range []struct{ name, value string }{{"namespace", c.Namespace}, {"cluster", c.Cluster},
		{"openbao-address", c.OpenBaoAddress}, {"bucket", c.Bucket}} {
		if f.value == "" {
			missing = append(missing, "--"+f.name)
		}
	}
	if c.Provider == ProviderS3 && c.Endpoint == "" {
		missing = append(missing, "--endpoint")
	}
	switch {
	case len(missing) > 0:
		return fmt.Errorf("missing flags: %v", missing)
	case c.Auth == AuthJWT && c.JWTFile == "":
		return errors.New("--auth=jwt needs --jwt-file")
	case c.Auth == AuthToken && c.TokenFile == "":
		return errors.New("--auth=token needs --token-file")
	case c.Auth != AuthJWT && c.Auth != AuthToken:
		return fmt.Errorf("--auth=%s: want jwt or token", c.Auth)
	case c.Provider != ProviderS3 && c.Provider != ProviderGCS && c.Provider != ProviderAzure:
		return fmt.Errorf("--provider=%s: want S3, GCS or Azure", c.Provider)
	case c.Concurrency < 1:
		return errors.New("--concurrency must be at least 1")
	case c.Retention.MaxCount < 0 || c.Retention.MaxAge < 0:
		return errors.New("--retention-max-count and --retention-max-age must not be negative")
	}
	return nil
}
