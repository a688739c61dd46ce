// Package identity decides the operator's own identity inside an OpenBao
// cluster, so that rollouts and backups never need the root token: a JWT
// auth method that verifies the Kubernetes cluster's service-account
// tokens, one narrow policy and one role per task, each role bound to one
// ServiceAccount of the cluster and to an audience only this cluster
// accepts. From revision 3 every role has its own ServiceAccount and its
// own audience, so a token minted for one role logs in to no other. The
// operator sets it up once, with the root token at sys/init or as
// self-init requests. It is pure: the issuer's keys are passed in.
package identity

import (
	"context"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/go-jose/go-jose/v4"

	"github.com/openbao/operator/api/v1alpha1"
	"github.com/openbao/operator/internal/baoconfig"
	"github.com/openbao/operator/internal/openbao"
)

// Names in OpenBao. The mount is the default of spec.upgrade.jwtAuthPath.
const (
	Mount         = "openbao-operator"
	UpgradeRole   = v1alpha1.UpgradeJWTRole
	BackupRole    = v1alpha1.BackupJWTRole
	UpgradePolicy = "openbao-operator-upgrade"
	BackupPolicy  = "openbao-operator-backup"
	// RestoreRole has its own policy: a backup's token can read a
	// snapshot but never install one. From revision 3 it is bound to the
	// restore ServiceAccount and audience (before, to the backup's).
	RestoreRole   = "restore"
	RestorePolicy = "openbao-operator-restore"
	// DrillRole is what the operator logs in to a restore drill's copy
	// with: read-only, and bound to an audience this cluster accepts only
	// while a backup takes its snapshot (DrillArm), so the token the copy
	// receives logs in to nothing here.
	DrillRole   = "drill"
	DrillPolicy = "openbao-operator-drill"
	// TokenTTL bounds the OpenBao tokens the roles issue: long enough for
	// one rollout step or one snapshot, short enough that a leaked one
	// expires soon.
	TokenTTL = 15 * time.Minute
	// TokenMaxTTL is the most a token of these roles can be renewed to.
	TokenMaxTTL = time.Hour
	// CanaryMount is a KV version 1 secrets engine of the operator's own:
	// before each snapshot the backup executor writes CanaryPath there,
	// so that a restored copy can be checked against what the backup
	// recorded. It shares the auth method's name: secrets engines and auth
	// methods are mounted apart.
	CanaryMount = "openbao-operator"
	CanaryPath  = CanaryMount + "/canary"
)

// Revision is the revision of the identity this release sets up; a
// cluster records the one it got in status.identityRevision, and one set
// up by an earlier release is brought up to date with the stored root
// token (Apply is idempotent).
//
//	1: the JWT auth method, the upgrade and backup roles and policies.
//	2: the restore role and policy, the canary mount, and the backup
//	   policy's right to write and read the canary.
//	3: one ServiceAccount and one audience per role: restore bound to
//	   <cluster>-restore-serviceaccount, each role to the audience
//	   openbao-operator:<ns>/<cluster>:<role>; the drill role and policy
//	   (bound to <cluster>-drill-serviceaccount), and the backup policy's
//	   right to set the drill role's audience (DrillArm).
const Revision = 3

// PerRoleRevision is the revision from which each role has its own
// ServiceAccount and audience (LoginFor) and the drill role exists.
const PerRoleRevision = 3

// upgradePolicy allows what rollouts, peer removal and autopilot need, and
// nothing else: no secret, no auth or policy change, no snapshot.
const upgradePolicy = `path "sys/step-down" { capabilities = ["update", "sudo"] }
path "sys/storage/raft/configuration" { capabilities = ["read"] }
path "sys/storage/raft/autopilot/state" { capabilities = ["read"] }
path "sys/storage/raft/autopilot/configuration" { capabilities = ["read", "update"] }
path "sys/storage/raft/remove-peer" { capabilities = ["update"] }
`

// backupPolicy allows reading a Raft snapshot, writing the canary (read
// back to check it) and setting the drill role's audience to one of this
// cluster's drill audiences (nothing else of the role: its account, its
// policies), and nothing else: no other path of the canary mount, no
// secret. A list value of bound_audiences is refused by
// allowed_parameters, so DrillArm sends a string.
func backupPolicy(c *v1alpha1.OpenBaoCluster) string {
	return `path "sys/storage/raft/snapshot" { capabilities = ["read"] }
path "` + CanaryPath + `" { capabilities = ["create", "update", "read"] }
path "` + DrillRolePath + `" {
  capabilities = ["update"]
  allowed_parameters = {
    "role_type" = ["jwt"]
    "bound_audiences" = ["` + c.DrillAudiencePrefix() + `*"]
  }
}
`
}

// DrillRolePath is the drill role's path.
const DrillRolePath = "auth/" + Mount + "/role/" + DrillRole

// drillPolicy allows what checking a restored copy needs: the canary and
// the Raft and autopilot state, read only.
const drillPolicy = `path "` + CanaryPath + `" { capabilities = ["read"] }
path "sys/storage/raft/configuration" { capabilities = ["read"] }
path "sys/storage/raft/autopilot/state" { capabilities = ["read"] }
path "sys/storage/raft/autopilot/configuration" { capabilities = ["read"] }
`

// restorePolicy allows installing a snapshot, and nothing else: no read
// of a snapshot or of any secret. snapshot-force is used only when an
// OpenBaoRestore sets force.
const restorePolicy = `path "sys/storage/raft/snapshot" { capabilities = ["update"] }
path "sys/storage/raft/snapshot-force" { capabilities = ["update"] }
`

// Issuer is what OpenBao needs to verify the Kubernetes cluster's
// service-account tokens: their iss claim and the keys that sign them.
type Issuer struct {
	URL           string
	PublicKeysPEM []string
}

// ErrNoKeys says a JWKS held no usable signing key.
var ErrNoKeys = errors.New("the service-account issuer publishes no usable public key")

// IssuerFromDiscovery reads the issuer URL from an OIDC discovery document
// and the public keys from a JWKS, as the Kubernetes API serves them at
// /.well-known/openid-configuration and /openid/v1/jwks.
func IssuerFromDiscovery(discovery, jwks []byte) (Issuer, error) {
	var doc struct {
		Issuer string `json:"issuer"`
	}
	if err := json.Unmarshal(discovery, &doc); err != nil || doc.Issuer == "" {
		return Issuer{}, fmt.Errorf("read the service-account issuer's discovery document: no issuer")
	}
	var set jose.JSONWebKeySet
	if err := json.Unmarshal(jwks, &set); err != nil {
		return Issuer{}, fmt.Errorf("read the service-account issuer's keys: %w", err)
	}
	var keys []string
	for _, k := range set.Keys {
		if !k.Valid() || !k.IsPublic() || (k.Use != "" && k.Use != "sig") {
			continue
		}
		der, err := x509.MarshalPKIXPublicKey(k.Key)
		if err != nil {
			continue // a key type OpenBao could not use either
		}
		keys = append(keys, string(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})))
	}
	if len(keys) == 0 {
		return Issuer{}, ErrNoKeys
	}
	sort.Strings(keys)
	return Issuer{URL: doc.Issuer, PublicKeysPEM: keys}, nil
}

// Requests returns the requests that set up the identity, in order: the
// auth method, the canary mount, the auth method's configuration, the
// policies, the roles. The same list is sent through the API with the root
// token after sys/init and rendered as self-init requests.
func Requests(c *v1alpha1.OpenBaoCluster, iss Issuer) []baoconfig.InitRequest {
	return append([]baoconfig.InitRequest{EnableRequest(), CanaryMountRequest()}, SetupRequests(c, iss)...)
}

// CanaryMountRequest enables the canary's KV version 1 secrets engine. It
// fails where the mount exists, so the API path checks first.
func CanaryMountRequest() baoconfig.InitRequest {
	return baoconfig.InitRequest{Name: "operator-canary-mount", Operation: "update", Path: "sys/mounts/" + CanaryMount,
		Data: map[string]any{"type": "kv", "options": map[string]any{"version": "1"},
			"description": "the OpenBao operator's backup canary"}}
}

// EnableRequest enables the JWT auth method. It fails on a cluster where
// the mount exists, so the API path checks first.
func EnableRequest() baoconfig.InitRequest {
	return baoconfig.InitRequest{Name: "operator-auth-enable", Operation: "update", Path: "sys/auth/" + Mount,
		Data: map[string]any{"type": "jwt", "description": "the OpenBao operator's own identity (rollouts, backups)"}}
}

// SetupRequests configure the mount, the policies and the roles; each is an
// idempotent update.
func SetupRequests(c *v1alpha1.OpenBaoCluster, iss Issuer) []baoconfig.InitRequest {
	keys := make([]any, len(iss.PublicKeysPEM))
	for i, k := range iss.PublicKeysPEM {
		keys[i] = k
	}
	return []baoconfig.InitRequest{
		{Name: "operator-auth-config", Operation: "update", Path: "auth/" + Mount + "/config",
			Data: map[string]any{"bound_issuer": iss.URL, "jwt_validation_pubkeys": keys}},
		policyRequest("operator-upgrade-policy", UpgradePolicy, upgradePolicy),
		policyRequest("operator-backup-policy", BackupPolicy, backupPolicy(c)),
		policyRequest("operator-restore-policy", RestorePolicy, restorePolicy),
		policyRequest("operator-drill-policy", DrillPolicy, drillPolicy),
		roleRequest("operator-upgrade-role", UpgradeRole, c, UpgradePolicy),
		roleRequest("operator-backup-role", BackupRole, c, BackupPolicy),
		roleRequest("operator-restore-role", RestoreRole, c, RestorePolicy),
		roleRequest("operator-drill-role", DrillRole, c, DrillPolicy),
	}
}

func policyRequest(name, policy, rules string) baoconfig.InitRequest {
	return baoconfig.InitRequest{Name: name, Operation: "update", Path: "sys/policies/acl/" + policy,
		Data: map[string]any{"policy": rules}}
}

// roleRequest binds role to its own ServiceAccount and audience (the drill
// role to its idle audience, which no token carries).
func roleRequest(name, role string, c *v1alpha1.OpenBaoCluster, policy string) baoconfig.InitRequest {
	l := ownLogin(c, role)
	return baoconfig.InitRequest{Name: name, Operation: "update", Path: "auth/" + Mount + "/role/" + role,
		Data: map[string]any{
			"role_type":       "jwt",
			"user_claim":      "sub",
			"bound_subject":   Subject(c.Namespace, l.ServiceAccount),
			"bound_audiences": []any{l.Audience},
			"token_policies":  []any{policy},
			"token_ttl":       fmt.Sprintf("%ds", int64(TokenTTL/time.Second)),
			"token_max_ttl":   fmt.Sprintf("%ds", int64(TokenMaxTTL/time.Second)),
			"token_type":      "service",
		}}
}

// Writer is what Apply needs of an OpenBao client holding the root token.
type Writer interface {
	AuthMethods(ctx context.Context) (map[string]string, error)
	SecretsEngines(ctx context.Context) (map[string]openbao.SecretsEngine, error)
	Write(ctx context.Context, path string, data map[string]any) error
}

// Apply sets the identity up through the API: the auth method and the
// canary mount unless they exist, then every setup request. Each request
// is an idempotent update, so an Apply cut short is finished by the next,
// and an Apply over an earlier revision brings it up to this one.
func Apply(ctx context.Context, w Writer, c *v1alpha1.OpenBaoCluster, iss Issuer) error {
	var reqs []baoconfig.InitRequest
	auths, err := w.AuthMethods(ctx)
	if err != nil {
		return fmt.Errorf("list auth methods: %w", err)
	}
	if typ, ok := auths[Mount]; !ok {
		reqs = append(reqs, EnableRequest())
	} else if typ != "jwt" {
		return fmt.Errorf("auth method %s exists with type %s, not jwt: %w", Mount, typ, ErrMountTaken)
	}
	engines, err := w.SecretsEngines(ctx)
	if err != nil {
		return fmt.Errorf("list secrets engines: %w", err)
	}
	if e, ok := engines[CanaryMount]; !ok {
		reqs = append(reqs, CanaryMountRequest())
	} else if !e.KVVersion1() {
		return fmt.Errorf("secrets engine %s/ exists as %s, not kv version 1: %w", CanaryMount, e, ErrCanaryMountTaken)
	}
	for _, r := range append(reqs, SetupRequests(c, iss)...) {
		if err := w.Write(ctx, r.Path, r.Data); err != nil {
			return fmt.Errorf("set up the operator's identity (%s): %w", r.Name, err)
		}
	}
	return nil
}

// ErrMountTaken says the operator's mount path holds another auth method.
var ErrMountTaken = errors.New("the operator's auth mount path is taken")

// ErrCanaryMountTaken says the canary's mount path holds another secrets
// engine (or KV version 2, whose paths differ).
var ErrCanaryMountTaken = errors.New("the operator's canary mount path is taken")
