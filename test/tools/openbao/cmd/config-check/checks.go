package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/hashicorp/go-discover"
	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/go-secure-stdlib/tlsutil"
	wrapping "github.com/openbao/go-kms-wrapping/v2"
	"github.com/openbao/openbao/command/server"
	"github.com/openbao/openbao/helper/logging"
	"github.com/openbao/openbao/helper/profiles"
	"github.com/openbao/openbao/internalshared/configutil"
	"github.com/openbao/openbao/physical/raft"
	"github.com/openbao/openbao/sdk/v2/logical"
)

func checkLogging(c *server.Config) []error {
	var errs []error
	if _, err := logging.ParseLogLevel(c.LogLevel); err != nil {
		errs = append(errs, err)
	}
	if _, err := logging.ParseLogFormat(c.LogFormat); err != nil {
		errs = append(errs, err)
	}
	return errs
}

// checkListeners repeats what listenerutil does with a tcp listener before
// it loads certificates (TLSConfig, NewCertificateGetter).
func checkListeners(c *server.Config) []error {
	if len(c.Listeners) == 0 {
		return []error{errors.New("no listener")}
	}
	var errs []error
	for i, l := range c.Listeners {
		if l.Type != "tcp" {
			errs = append(errs, fmt.Errorf("listener %d: type %q, want tcp", i, l.Type))
		}
		for _, addr := range []string{l.Address, l.ClusterAddress} {
			if _, _, err := net.SplitHostPort(addr); addr != "" && err != nil {
				errs = append(errs, fmt.Errorf("listener %d: address %q: %w", i, addr, err))
			}
		}
		if l.TLSDisable {
			continue
		}
		for name, v := range map[string]string{"tls_min_version": l.TLSMinVersion, "tls_max_version": l.TLSMaxVersion} {
			if _, ok := tlsutil.TLSLookup[v]; v != "" && !ok {
				errs = append(errs, fmt.Errorf("listener %d: %s %q is not supported", i, name, v))
			}
		}
		if (l.TLSCertFile == "") != (l.TLSKeyFile == "") {
			errs = append(errs, fmt.Errorf("listener %d: tls_cert_file and tls_key_file go together", i))
		}
		if l.TLSCertFile == "" && len(l.TLSACMEDomains) == 0 {
			errs = append(errs, fmt.Errorf("listener %d: ACME without tls_acme_domains answers any SNI name", i))
		}
	}
	return append(errs, checkListenerAddresses(c)...)
}

// checkListenerAddresses repeats what ServerCommand.InitListeners binds:
// each tcp listener's address, and a cluster listener at its
// cluster_address or else at its own port + 1. bao fails at start when two
// of them collide (a wildcard host collides with every host).
func checkListenerAddresses(c *server.Config) []error {
	type bound struct {
		host, port, what string
	}
	var seen []bound
	var errs []error
	for i, l := range c.Listeners {
		host, port, err := net.SplitHostPort(l.Address)
		if err != nil {
			continue // reported by checkListeners
		}
		addrs := []bound{{host, port, fmt.Sprintf("listener %d address", i)}}
		cluster := bound{host: host, what: fmt.Sprintf("listener %d cluster address", i)}
		if l.ClusterAddress != "" {
			if cluster.host, cluster.port, err = net.SplitHostPort(l.ClusterAddress); err != nil {
				continue
			}
		} else if n, err := strconv.Atoi(port); err == nil {
			cluster.port = strconv.Itoa(n + 1)
		}
		addrs = append(addrs, cluster)
		for _, a := range addrs {
			for _, b := range seen {
				if a.port == b.port && (a.host == b.host || wildcard(a.host) || wildcard(b.host)) {
					errs = append(errs, fmt.Errorf("%s %s binds the port of %s %s",
						a.what, net.JoinHostPort(a.host, a.port), b.what, net.JoinHostPort(b.host, b.port)))
				}
			}
			seen = append(seen, a)
		}
	}
	return errs
}

func wildcard(host string) bool {
	return host == "" || host == "0.0.0.0" || host == "::" || host == "[::]"
}

// raftKeys are the storage "raft" keys physical/raft reads (NewRaftBackend,
// SetupCluster, JoinConfig) and ParseStorage extracts; raft ignores others.
var raftKeys = []string{
	"apply_delay", "autopilot_reconcile_interval", "autopilot_update_interval",
	"autopilot_upgrade_version", "dead_server_last_contact_threshold", "last_contact_threshold",
	"max_entry_size", "max_transaction_size", "node_id", "path", "performance_multiplier",
	"retry_join", "retry_join_as_non_voter", "server_stabilization_time", "snapshot_delay",
	"snapshot_interval", "snapshot_threshold", "trailing_logs",
}

// checkStorage builds the raft backend with OpenBao's constructor in a
// scratch directory (it parses and cross-checks the timers) and decodes
// retry_join as JoinConfig does, strictly.
func checkStorage(c *server.Config) []error {
	if c.Storage == nil {
		return []error{errors.New("no storage stanza")}
	}
	if c.Storage.Type != "raft" {
		return []error{fmt.Errorf("storage %q: only raft is checked", c.Storage.Type)}
	}
	var errs []error
	for k := range c.Storage.Config {
		if !slices.Contains(raftKeys, k) {
			errs = append(errs, fmt.Errorf("storage raft: unknown key %q", k))
		}
	}
	if v, ok := c.Storage.Config["performance_multiplier"]; ok {
		if _, err := strconv.Atoi(v); err != nil {
			errs = append(errs, fmt.Errorf("storage raft: performance_multiplier: %w", err))
		}
	}
	dir, err := os.MkdirTemp("", "bao-config-check-")
	if err != nil {
		return append(errs, err)
	}
	defer os.RemoveAll(dir)
	os.Setenv(raft.EnvVaultRaftPath, dir)
	os.Setenv(raft.EnvVaultRaftNodeID, "config-check")
	backend, err := raft.NewRaftBackend(c.Storage.Config, hclog.NewNullLogger())
	if err != nil {
		return append(errs, fmt.Errorf("storage raft: %w", err))
	}
	defer backend.(*raft.RaftBackend).Close()
	return append(errs, checkRetryJoin(c.Storage.Config["retry_join"])...)
}

func checkRetryJoin(raw string) []error {
	if raw == "" {
		return nil
	}
	var infos []*raft.LeaderJoinInfo
	dec := json.NewDecoder(bytes.NewReader([]byte(raw)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&infos); err != nil {
		return []error{fmt.Errorf("retry_join: %w", err)}
	}
	var errs []error
	for i, info := range infos {
		switch {
		case info.AutoJoin != "" && info.LeaderAPIAddr != "":
			errs = append(errs, fmt.Errorf("retry_join %d: both leader_api_addr and auto_join", i))
		case info.AutoJoin == "" && info.LeaderAPIAddr == "":
			errs = append(errs, fmt.Errorf("retry_join %d: neither leader_api_addr nor auto_join", i))
		case info.AutoJoinScheme != "" && info.AutoJoinScheme != "http" && info.AutoJoinScheme != "https":
			errs = append(errs, fmt.Errorf("retry_join %d: auto_join_scheme %q", i, info.AutoJoinScheme))
		case info.AutoJoin != "":
			if err := checkAutoJoin(info.AutoJoin); err != nil {
				errs = append(errs, fmt.Errorf("retry_join %d: auto_join: %w", i, err))
			}
		}
	}
	return errs
}

// k8sArgs are the arguments go-discover's k8s provider reads.
var k8sArgs = []string{"provider", "kubeconfig", "namespace", "label_selector", "field_selector", "host_network"}

func checkAutoJoin(query string) error {
	args, err := discover.Parse(query)
	if err != nil {
		return err
	}
	provider := args["provider"]
	if provider != "k8s" {
		if _, ok := discover.Providers[provider]; !ok {
			return fmt.Errorf("unknown provider %q", provider)
		}
		return nil
	}
	for k := range args {
		if !slices.Contains(k8sArgs, k) {
			return fmt.Errorf("k8s provider: unknown argument %q", k)
		}
	}
	if args["label_selector"] == "" {
		return errors.New("k8s provider without label_selector joins every pod of the namespace")
	}
	return nil
}

// sealOptions are the attributes each KMS wrapper reads (go-kms-wrapping
// v2 wrappers as pinned by OpenBao 2.4.0, options.go); they ignore others.
var sealOptions = map[wrapping.WrapperType][]string{
	wrapping.WrapperTypeAwsKms: {"access_key", "disallow_env_vars", "endpoint", "key_not_required", "kms_key_id",
		"region", "role_arn", "role_session_name", "secret_key", "session_token", "shared_creds_filename",
		"shared_creds_profile", "web_identity_token_file"},
	wrapping.WrapperTypeGcpCkms: {"credentials", "crypto_key", "key_not_required", "key_ring", "project",
		"region", "user_agent"},
	wrapping.WrapperTypeAzureKeyVault: {"client_id", "client_secret", "disallow_env_vars", "environment",
		"key_name", "key_not_required", "resource", "tenant_id", "vault_name"},
	wrapping.WrapperTypeTransit: {"address", "disable_renewal", "key_id_prefix", "key_name", "mount_path",
		"namespace", "tls_ca_cert", "tls_ca_path", "tls_client_cert", "tls_client_key", "tls_server_name",
		"tls_skip_verify", "token"},
}

// checkSeals configures a static seal with OpenBao's own wrapper set-up,
// its key files swapped for scratch keys; KMS seals would dial their
// service, so only their attribute names are checked.
func checkSeals(c *server.Config) []error {
	var errs []error
	for i, seal := range c.Seals {
		t := wrapping.WrapperType(seal.Type)
		if t == wrapping.WrapperTypeStatic {
			if err := checkStaticSeal(seal); err != nil {
				errs = append(errs, fmt.Errorf("seal %d (static): %w", i, err))
			}
			continue
		}
		known, ok := sealOptions[t]
		if !ok {
			errs = append(errs, fmt.Errorf("seal %d: type %q is not checked", i, seal.Type))
			continue
		}
		for k := range seal.Config {
			if !slices.Contains(known, k) {
				errs = append(errs, fmt.Errorf("seal %d (%s): unknown key %q", i, seal.Type, k))
			}
		}
	}
	return errs
}

func checkStaticSeal(seal *configutil.KMS) error {
	dir, err := os.MkdirTemp("", "bao-config-check-seal-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	swapped := *seal
	swapped.Config = make(map[string]string, len(seal.Config))
	for k, v := range seal.Config {
		swapped.Config[k] = v
		if k != "current_key" && k != "previous_key" {
			continue
		}
		if !strings.HasPrefix(v, "file://") {
			return fmt.Errorf("%s is not a file:// reference", k)
		}
		key := make([]byte, 32)
		if _, err := rand.Read(key); err != nil {
			return err
		}
		path := filepath.Join(dir, k)
		if err := os.WriteFile(path, key, 0o600); err != nil {
			return err
		}
		swapped.Config[k] = "file://" + path
	}
	var infoKeys []string
	info := map[string]string{}
	_, err = configutil.ConfigureWrapper(&swapped, &infoKeys, &info, hclog.NewNullLogger())
	return err
}

func checkServiceRegistration(c *server.Config) []error {
	sr := c.ServiceRegistration
	if sr == nil {
		return nil
	}
	if sr.Type != "kubernetes" {
		return []error{fmt.Errorf("service_registration %q: only kubernetes is checked", sr.Type)}
	}
	var errs []error
	for k := range sr.Config {
		if k != "namespace" && k != "pod_name" {
			errs = append(errs, fmt.Errorf("service_registration kubernetes: unknown key %q", k))
		}
	}
	return errs
}

// checkSelfInit builds OpenBao's profile engine over the initialize
// stanzas, which validates names as the server does after the first
// unseal, and reports keys the profile decoder left unused.
func checkSelfInit(c *server.Config) []error {
	if len(c.Initialization) == 0 {
		return nil
	}
	var errs []error
	for _, outer := range c.Initialization {
		// The request blocks are decoded on their own after the outer one.
		delete(outer.UnusedKeys, "request")
		for _, e := range configutil.ValidateUnusedFields(outer.UnusedKeys, "initialize "+outer.Type) {
			errs = append(errs, fmt.Errorf("unknown key: %s", e.String()))
		}
		for _, req := range outer.Requests {
			for _, e := range configutil.ValidateUnusedFields(req.UnusedKeys, "request "+req.Type) {
				errs = append(errs, fmt.Errorf("unknown key: %s", e.String()))
			}
		}
	}
	_, err := profiles.NewEngine(
		profiles.WithEnvSource(), profiles.WithFileSource(),
		profiles.WithRequestSource(), profiles.WithResponseSource(),
		profiles.WithOuterBlockName("initialize"),
		profiles.WithProfile(c.Initialization),
		profiles.WithRequestHandler(noRequests),
	)
	if err != nil {
		errs = append(errs, fmt.Errorf("initialize: %w", err))
	}
	return errs
}

// noRequests is the profile engine's request handler; the checker never
// evaluates a profile.
func noRequests(context.Context, *logical.Request) (*logical.Response, error) {
	return nil, errors.New("bao-config-check does not run requests")
}
