package executor

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"path/filepath"
	"strings"

	"github.com/openbao/operator/internal/backup"
	"github.com/openbao/operator/internal/objectstore"
	"github.com/openbao/operator/internal/openbao"
)

// prepare reads the mounted files once and builds the store. Every secret
// it reads goes into the redactor before anything else can print it.
func prepare(ctx context.Context, cfg backup.ExecutorConfig, deps Deps, secrets *redactor) (*runner, error) {
	s := &runner{cfg: cfg, deps: deps, prefix: backup.ObjectPrefix(cfg.PathPrefix, cfg.Namespace, cfg.Cluster)}
	if cfg.OpenBaoCAFile != "" {
		ca, err := deps.ReadFile(cfg.OpenBaoCAFile)
		if err != nil {
			return nil, fmt.Errorf("read the OpenBao CA: %w", err)
		}
		s.caPEM = ca
	}
	if err := s.readProvenanceKey(deps); err != nil {
		return nil, err
	}
	storeCfg, err := storeConfig(cfg, deps, secrets)
	if err != nil {
		return nil, err
	}
	if s.store, err = deps.NewStore(ctx, storeCfg); err != nil {
		return nil, err
	}
	s.auth, err = authenticator(cfg, deps, s, secrets)
	return s, err
}

// readProvenanceKey reads the cluster's provenance key. A missing file
// (a restore whose source's Secret is gone, mounted optional) leaves a
// prover that proves nothing; a backup refuses to run without one.
func (s *runner) readProvenanceKey(deps Deps) error {
	if s.cfg.ProvenanceKeyFile == "" {
		return nil
	}
	key, err := deps.ReadFile(s.cfg.ProvenanceKeyFile)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil
	case err != nil:
		return fmt.Errorf("read the provenance key: %w", err)
	case len(key) != backup.ProvenanceKeyBytes:
		return fmt.Errorf("the provenance key in %s is %d bytes, not %d", s.cfg.ProvenanceKeyFile, len(key), backup.ProvenanceKeyBytes)
	}
	s.prover = backup.NewProver(key, s.cfg.Namespace, s.cfg.Cluster)
	return nil
}

func storeConfig(cfg backup.ExecutorConfig, deps Deps, secrets *redactor) (objectstore.Config, error) {
	out := objectstore.Config{
		Provider: cfg.Provider, Endpoint: cfg.Endpoint, Bucket: cfg.Bucket, Region: cfg.Region, PathStyle: cfg.PathStyle,
		PartSize: cfg.PartSize, Concurrency: cfg.Concurrency,
	}
	if cfg.StoreCAFile != "" {
		ca, err := deps.ReadFile(cfg.StoreCAFile)
		if err != nil {
			return out, fmt.Errorf("read the object store's CA: %w", err)
		}
		out.CAPEM = ca
	}
	if cfg.CredentialsDir == "" {
		// The pod's cloud identity: this runs in the cluster's Job, under
		// the cluster's own ServiceAccount, never in the operator.
		out.AmbientIdentity = true
		return out, nil
	}
	// A key the Secret lacks is a missing file; StoreCredentials says
	// which keys the provider needs.
	read := func(key string) (string, error) {
		data, err := deps.ReadFile(filepath.Join(cfg.CredentialsDir, key))
		if errors.Is(err, fs.ErrNotExist) {
			return "", nil
		}
		if err != nil {
			return "", err
		}
		v := strings.TrimSpace(string(data))
		secrets.add(v)
		return v, nil
	}
	creds, err := backup.StoreCredentials(cfg.Provider, read)
	if err != nil {
		return out, err
	}
	out.Credentials = creds
	return out, nil
}

// authenticator returns how an attempt gets its token: the token file,
// or a login with the projected service-account token, read afresh each
// time (the kubelet rotates it).
func authenticator(cfg backup.ExecutorConfig, deps Deps, s *runner, secrets *redactor) (func(context.Context) (openbao.Token, error), error) {
	readSecret := func(path string) (openbao.Token, error) {
		data, err := deps.ReadFile(path)
		if err != nil {
			return openbao.Token{}, fmt.Errorf("read %s: %w", path, err)
		}
		v := strings.TrimSpace(string(data))
		if v == "" {
			return openbao.Token{}, fmt.Errorf("%s is empty", path)
		}
		secrets.add(v)
		return openbao.NewToken(v), nil
	}
	if cfg.Auth == backup.AuthToken {
		tok, err := readSecret(cfg.TokenFile)
		return func(context.Context) (openbao.Token, error) { return tok, nil }, err
	}
	return func(ctx context.Context) (openbao.Token, error) {
		jwt, err := readSecret(cfg.JWTFile)
		if err != nil {
			return openbao.Token{}, err
		}
		c, err := s.client(cfg.OpenBaoAddress, openbao.Token{})
		if err != nil {
			return openbao.Token{}, err
		}
		tok, _, err := c.Login(ctx, cfg.JWTMount, cfg.JWTRole, jwt)
		if err == nil {
			secrets.add(tok.Reveal())
		}
		return tok, err
	}, nil
}

func (s *runner) client(address string, token openbao.Token) (openbao.Client, error) {
	u, err := url.Parse(address)
	if err != nil {
		return nil, fmt.Errorf("OpenBao address %q: %w", address, err)
	}
	return s.deps.OpenBao(openbao.Options{Address: address, CACert: s.caPEM, ServerName: u.Hostname(), Token: token})
}

// leaderClient is a client of the active server holding token, at the
// active server's own address as sys/leader names it. The client Service
// routes each new connection to any Ready server (where it routes to the
// active one only, with ACME or from OpenBao 2.5, a change of leadership
// may leave it naming a standby), and a standby redirects snapshot
// requests rather than forward them: the server that answered sys/leader
// through the Service is not the one the next request reaches. The
// address must be one of this cluster's. A server that leads without
// naming itself (storage without HA) is asked through the Service.
func (s *runner) leaderClient(ctx context.Context, token openbao.Token) (openbao.Client, error) {
	svc, err := s.client(s.cfg.OpenBaoAddress, openbao.Token{})
	if err != nil {
		return nil, err
	}
	leader, err := svc.Leader(ctx)
	if err != nil {
		return nil, stage(ReasonLeaderNotFound, err)
	}
	address := s.cfg.OpenBaoAddress
	if leader.HAEnabled {
		if leader.LeaderAddress == "" {
			return nil, stage(ReasonLeaderNotFound, fmt.Errorf("no server is active: %w", openbao.ErrStandby))
		}
		if err := s.ownServer(leader.LeaderAddress); err != nil {
			return nil, stage(ReasonLeaderNotFound, err)
		}
		address = leader.LeaderAddress
	}
	return s.client(address, token)
}

// ownServer accepts a leader address only on the client Service's host or
// under the servers' own domain, with the same scheme: the token goes to
// no other host.
func (s *runner) ownServer(address string) error {
	svc, _ := url.Parse(s.cfg.OpenBaoAddress)
	u, err := url.Parse(address)
	if err == nil && u.Scheme == svc.Scheme &&
		(u.Hostname() == svc.Hostname() || (s.cfg.ServerDomain != "" && strings.HasSuffix(u.Hostname(), "."+s.cfg.ServerDomain))) {
		return nil
	}
	return fmt.Errorf("the active server's address %q is not a server of this cluster (%s, *.%s)",
		address, svc.Hostname(), s.cfg.ServerDomain)
}

// verify checks that the store holds what was sent: the size, and the
// store's checksum against the one computed from the stream; a store that
// keeps no checksums is read back and hashed. An object that fails is
// deleted: it must never be taken for the latest backup.
func (s *runner) verify(ctx context.Context, key string, put objectstore.PutResult, sent sizedSum) error {
	err := s.compare(ctx, key, put, sent)
	if err == nil {
		return nil
	}
	if derr := s.store.Delete(context.WithoutCancel(ctx), key); derr != nil {
		err = fmt.Errorf("%w; deleting it failed too: %w", err, derr)
	}
	return stage(ReasonUploadUnverified, err)
}

type sizedSum interface {
	Size() int64
	SHA256() string
}

func (s *runner) compare(ctx context.Context, key string, put objectstore.PutResult, sent sizedSum) error {
	obj, err := s.store.Stat(ctx, key)
	if err != nil {
		return fmt.Errorf("stat the uploaded object: %w", err)
	}
	if obj.Size != sent.Size() || put.Size != sent.Size() {
		return fmt.Errorf("the store holds %d bytes of the %d sent", obj.Size, sent.Size())
	}
	if obj.Checksum != "" {
		if obj.Checksum != put.Checksum {
			return fmt.Errorf("the store's checksum %s differs from the %s sent", obj.Checksum, put.Checksum)
		}
		return nil
	}
	return s.readBack(ctx, key, sent.SHA256())
}

func (s *runner) readBack(ctx context.Context, key, want string) error {
	r, err := s.store.Open(ctx, key)
	if err != nil {
		return fmt.Errorf("read the uploaded object back: %w", err)
	}
	defer r.Close()
	got, err := sha256Of(r)
	if err != nil {
		return fmt.Errorf("read the uploaded object back: %w", err)
	}
	if got != want {
		return fmt.Errorf("the stored object's SHA-256 differs from the one sent")
	}
	return nil
}

// redactor replaces every secret the executor read in text it reports.
type redactor struct{ values []string }

func (r *redactor) add(v string) {
	if len(v) >= 4 {
		r.values = append(r.values, v)
	}
}

func (r *redactor) redact(text string) string {
	for _, v := range r.values {
		text = strings.ReplaceAll(text, v, "[redacted]")
	}
	return text
}
