package envtest_test

import (
	"context"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/openbao/operator/api/v1alpha1"
)

// invalidClusters are specs the API server must reject; each names the field
// path and a phrase its message must hold.
var invalidClusters = []struct {
	name, manifest, field, phrase string
}{
	{"a name that is not a DNS label", `metadata: {name: 1bao}
spec: {version: 2.4.0}`, "", "metadata.name must be a DNS label"},
	{"a name longer than 40 characters", `metadata: {name: a-name-that-is-far-too-long-for-the-children-x}
spec: {version: 2.4.0}`, "", "at most 40 characters"},
	{"a version that is not semver", `spec: {version: "2.4"}`, "spec.version", "should match"},
	{"no version", `spec: {replicas: 3}`, "spec.version", "Required value"},
	{"zero replicas", `spec: {version: 2.4.0, replicas: 0}`, "spec.replicas", "greater than or equal to 1"},
	{"too many replicas", `spec: {version: 2.4.0, replicas: 12}`, "spec.replicas", "less than or equal to 11"},
	{"an image with a tag", `spec: {version: 2.4.0, image: "quay.io/openbao/openbao:2.4.0"}`, "spec.image", "should match"},
	{"an unknown TLS mode", `spec: {version: 2.4.0, tls: {mode: Manual}}`, "spec.tls.mode", "Unsupported value"},
	{"ACME without its settings", `spec: {version: 2.4.0, tls: {mode: ACME}}`, "spec.tls", "tls.acme is required"},
	{"ACME settings in another mode", `spec: {version: 2.4.0, tls: {mode: External, external: {serverSecretRef: {name: bao-cert}}, acme: {directory: "https://acme.example", domains: [a.example.com]}}}`, "spec.tls", "tls.acme is required when tls.mode is ACME and not allowed otherwise"},
	{"External without the Secret it serves", `spec: {version: 2.4.0, tls: {mode: External}}`, "spec.tls", "tls.external is required when tls.mode is External"},
	{"an External Secret in another mode", `spec: {version: 2.4.0, tls: {external: {serverSecretRef: {name: bao-cert}}}}`, "spec.tls", "tls.external is required when tls.mode is External and not allowed otherwise"},
	{"an External Secret that is not a name", `spec: {version: 2.4.0, tls: {mode: External, external: {serverSecretRef: {name: Bao_Cert}}}}`, "spec.tls.external.serverSecretRef.name", "should match"},
	{"an ACME directory over plain HTTP", `spec: {version: 2.4.0, tls: {mode: ACME, acme: {directory: "http://acme.example", domains: [a.example.com]}}}`, "spec.tls.acme.directory", "should match"},
	{"a rotation period under an hour", `spec: {version: 2.4.0, tls: {rotationPeriod: 30m}}`, "spec.tls.rotationPeriod", "at least 1h"},
	{"a rotation period with external certificates", `spec: {version: 2.4.0, tls: {mode: External, external: {serverSecretRef: {name: bao-cert}}, rotationPeriod: 720h}}`, "spec.tls", "applies only to certificates the operator issues"},
	{"a rotate request with external certificates", `spec: {version: 2.4.0, tls: {mode: External, external: {serverSecretRef: {name: bao-cert}}, rotateRequest: "2026-05-01T10:00:00Z"}}`, "spec.tls", "tls.rotateRequest applies only to certificates the operator issues"},
	{"an extra SAN that is not a name", `spec: {version: 2.4.0, tls: {extraSANs: ["not a name"]}}`, "spec.tls.extraSANs[0]", "should match"},
	{"an unknown seal", `spec: {version: 2.4.0, unseal: {type: shamir}}`, "spec.unseal.type", "Unsupported value"},
	{"options on the static seal", `spec: {version: 2.4.0, unseal: {type: static, options: {region: x}}}`, "spec.unseal", "only to external KMS seals"},
	{"a credential in seal options", `spec: {version: 2.4.0, unseal: {type: awskms, options: {secret_key: x}}}`, "spec.unseal", "unseal.options.secret_key is a credential"},
	{"a seal option that is not an attribute", `spec: {version: 2.4.0, unseal: {type: awskms, options: {Region: x}}}`, "spec.unseal.options", "lower-case letters"},
	{"the listener stanza in config", `spec: {version: 2.4.0, config: {listener: x}}`, "spec.config.listener", "must not validate"},
	{"the seal stanza in config", `spec: {version: 2.4.0, config: {seal: {static: {}}}}`, "spec.config.seal", "must not validate"},
	{"replicas in chart values", `spec: {version: 2.4.0, values: {replicas: 5}}`, "spec.values.replicas", "must not validate"},
	{"a registry mirror in chart values", `spec: {version: 2.4.0, values: {imageRegistry: mirror.example.com}}`, "spec.values.imageRegistry", "must not validate"},
	{"self-init without requests", `spec: {version: 2.4.0, selfInit: {enabled: true}}`, "spec", "selfInit.requests must hold at least one request"},
	{"a self-init operation OpenBao lacks", `spec: {version: 2.4.0, selfInit: {enabled: true, requests: [{name: a, operation: write, path: sys/auth/x}]}}`, "spec.selfInit.requests[0].operation", "Unsupported value"},
	{"an ExternalName client Service", `spec: {version: 2.4.0, service: {type: ExternalName}}`, "spec.service.type", "Unsupported value"},
	{"an ingress without a host", `spec: {version: 2.4.0, ingress: {enabled: true}}`, "spec.ingress.host", "Required value"},
	{"a gateway route without parents", `spec: {version: 2.4.0, gateway: {enabled: true, parentRefs: [], hostnames: [a.example.com]}}`, "spec.gateway.parentRefs", "should have at least 1 items"},
	{"an unknown log level", `spec: {version: 2.4.0, configuration: {logging: {level: verbose}}}`, "spec.configuration.logging.level", "Unsupported value"},
	{"a Raft performance multiplier above 10", `spec: {version: 2.4.0, configuration: {raft: {performanceMultiplier: 11}}}`, "spec.configuration.raft.performanceMultiplier", "less than or equal to 10"},
	{"an autopilot interval under a second", `spec: {version: 2.4.0, configuration: {raft: {autopilotReconcileInterval: 500ms}}}`, "spec.configuration.raft.autopilotReconcileInterval", "between 1s and 10m"},
	{"an autopilot quorum below 3 with cleanup", `spec: {version: 2.4.0, configuration: {raft: {autopilot: {minQuorum: 2}}}}`, "spec.configuration.raft.autopilot", "minQuorum must be at least 3"},
	{"a dead-server threshold under a minute", `spec: {version: 2.4.0, configuration: {raft: {autopilot: {deadServerLastContactThreshold: 30s}}}}`, "spec.configuration.raft.autopilot.deadServerLastContactThreshold", "at least 1m"},
	{"a stabilization time in milliseconds", `spec: {version: 2.4.0, configuration: {raft: {autopilot: {serverStabilizationTime: 500ms}}}}`, "spec.configuration.raft.autopilot.serverStabilizationTime", "should match"},
	{"an unknown deletion policy", `spec: {version: 2.4.0, deletionPolicy: Orphan}`, "spec.deletionPolicy", "Unsupported value"},
	{"a minute out of range in the backup schedule", `spec: {version: 2.4.0, backup: {schedule: "61 * * * *", jwtAuthRole: backup, target: {endpoint: "https://s3.example.com", bucket: backups}}}`,
		"spec.backup.schedule", `the minute field "61" must be made of`},
	{"a backup schedule of four fields", `spec: {version: 2.4.0, backup: {schedule: "0 3 * *", jwtAuthRole: backup, target: {endpoint: "https://s3.example.com", bucket: backups}}}`,
		"spec.backup.schedule", "must have 5 fields"},
	{"an @every backup schedule", `spec: {version: 2.4.0, backup: {schedule: "@every 1h", jwtAuthRole: backup, target: {endpoint: "https://s3.example.com", bucket: backups}}}`,
		"spec.backup.schedule", "@every is not accepted"},
	{"a backup with both identities", `spec: {version: 2.4.0, backup: {jwtAuthRole: backup, tokenSecretRef: {name: t}, target: {endpoint: "https://s3.example.com", bucket: backups}}}`,
		"spec.backup", "set backup.jwtAuthRole or backup.tokenSecretRef, not both"},
	{"an upgrade with both identities", `spec: {version: 2.4.0, upgrade: {jwtAuthRole: upgrade, tokenSecretRef: {name: t}}}`,
		"spec.upgrade", "set upgrade.jwtAuthRole or upgrade.tokenSecretRef, not both"},
	{"a retention age in days", `spec: {version: 2.4.0, backup: {jwtAuthRole: backup, target: {endpoint: "https://s3.example.com", bucket: backups}, retention: {maxAge: 30d}}}`,
		"spec.backup.retention.maxAge", "days are not a unit"},
	{"an empty retention", `spec: {version: 2.4.0, backup: {jwtAuthRole: backup, target: {endpoint: "https://s3.example.com", bucket: backups}, retention: {}}}`,
		"spec.backup.retention", "needs maxCount, maxAge or both"},
	{"a backup endpoint with a path", `spec: {version: 2.4.0, backup: {jwtAuthRole: backup, target: {endpoint: "https://s3.example.com/x", bucket: backups}}}`,
		"spec.backup.target.endpoint", "should match"},
	{"a path prefix climbing up", `spec: {version: 2.4.0, backup: {jwtAuthRole: backup, target: {endpoint: "https://s3.example.com", bucket: backups, pathPrefix: "a/../b"}}}`,
		"spec.backup.target.pathPrefix", "must not hold . or .. segments"},
	{"a bootstrap backup with neither key nor latest", `spec: {version: 2.4.0, bootstrap: {fromBackup: {target: {endpoint: "https://s3.example.com", bucket: backups}, unsealKeySecretRef: {name: k}}}}`,
		"spec.bootstrap.fromBackup", "set exactly one of bootstrap.fromBackup.key and bootstrap.fromBackup.latest"},
	{"a bootstrap backup with a static seal and no key", `spec: {version: 2.4.0, bootstrap: {fromBackup: {target: {endpoint: "https://s3.example.com", bucket: backups}, latest: true}}}`,
		"spec", "bootstrap.fromBackup.unsealKeySecretRef is required with unseal.type static"},
	{"another cluster's backup without a way to bind the identity", `spec: {version: 2.4.0, bootstrap: {fromBackup: {target: {endpoint: "https://s3.example.com", bucket: backups}, latest: true, sourceCluster: old, unsealKeySecretRef: {name: k}}}}`,
		"<nil>", "bootstrap.fromBackup.sourceCluster names another cluster"},
	{"a kept source identity and a token", `spec: {version: 2.4.0, bootstrap: {fromBackup: {target: {endpoint: "https://s3.example.com", bucket: backups}, latest: true, sourceCluster: old, unsealKeySecretRef: {name: k}, keepSourceIdentity: true, tokenSecretRef: {name: t}}}}`,
		"spec.bootstrap.fromBackup", "keepSourceIdentity and bootstrap.fromBackup.tokenSecretRef exclude each other"},
	{"a bootstrap key climbing up", `spec: {version: 2.4.0, bootstrap: {fromBackup: {target: {endpoint: "https://s3.example.com", bucket: backups}, key: "a/../b", unsealKeySecretRef: {name: k}}}}`,
		"spec.bootstrap.fromBackup.key", "relative object key"},
}

// TestABackupWithNeitherRoleNorTokenIsAccepted: backup.jwtAuthRole
// defaults to the operator's role "backup", as upgrade.jwtAuthRole does,
// so the API server and the webhook accept a backup naming neither (a dry
// run: nothing is stored for the manager to act on); and every
// tokenSecretRef keeps the key it names.
func TestABackupWithNeitherRoleNorTokenIsAccepted(t *testing.T) {
	obj := rawCluster(t, managedNamespace, `metadata: {name: backup-default-role}
spec: {version: 2.4.0, backup: {target: {endpoint: "https://s3.example.com", bucket: backups}},
  upgrade: {tokenSecretRef: {name: up, key: upgrade-token}}}`)
	if err := k8s.Create(context.Background(), obj, client.DryRunAll); err != nil {
		t.Fatalf("create: %v", err)
	}
	if key, _, _ := unstructured.NestedString(obj.Object, "spec", "upgrade", "tokenSecretRef", "key"); key != "upgrade-token" {
		t.Errorf("spec.upgrade.tokenSecretRef.key = %q after admission, want upgrade-token", key)
	}
}

// TestInvalidClustersAreRejectedNamingTheField sends each manifest into the
// namespace the manager watches: a refusal must leave no stored cluster
// for the manager to half-apply, and no children under its name.
func TestInvalidClustersAreRejectedNamingTheField(t *testing.T) {
	ctx := context.Background()
	var names []string
	for i, tc := range invalidClusters {
		t.Run(tc.name, func(t *testing.T) {
			manifest := tc.manifest
			if !strings.Contains(manifest, "metadata:") {
				manifest = "metadata: {name: invalid-" + itoa(i) + "}\n" + manifest
			}
			// Raw manifests, as kubectl sends them: the typed client would drop
			// zero values such as replicas: 0 and let defaults replace them.
			obj := rawCluster(t, managedNamespace, manifest)
			names = append(names, obj.GetName())
			err := k8s.Create(ctx, obj)
			if !apierrors.IsInvalid(err) {
				t.Fatalf("create: got %v, want an Invalid error", err)
			}
			msg := err.Error()
			if !strings.Contains(msg, tc.field) || !strings.Contains(msg, tc.phrase) {
				t.Fatalf("error does not name %q with %q:\n%s", tc.field, tc.phrase, msg)
			}
		})
	}
	for _, name := range names {
		err := k8s.Get(ctx, client.ObjectKey{Namespace: managedNamespace, Name: name}, &v1alpha1.OpenBaoCluster{})
		if !apierrors.IsNotFound(err) {
			t.Errorf("rejected cluster %s: get: %v, want NotFound", name, err)
		}
		if left, err := childrenOf(ctx, managedNamespace, name); err != nil || len(left) > 0 {
			t.Errorf("rejected cluster %s left %v (%v)", name, left, err)
		}
	}
}

func TestImmutableFieldsRejectChanges(t *testing.T) {
	ctx := context.Background()
	createNamespace(t, "immutable")
	c := newCluster(t, "immutable", `
metadata: {name: fixed}
spec: {version: 2.4.0, storage: {size: 1Gi}}
`)
	if err := k8s.Create(ctx, c); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, field, phrase string
		change              func(*v1alpha1.OpenBaoCluster)
	}{
		{"storage class", "spec.storage", "storage.storageClassName is immutable", func(c *v1alpha1.OpenBaoCluster) {
			c.Spec.Storage.StorageClassName = ptr.To("other")
		}},
		{"seal type", "spec.unseal", "unseal.type is immutable", func(c *v1alpha1.OpenBaoCluster) {
			c.Spec.Unseal = v1alpha1.UnsealSpec{Type: v1alpha1.UnsealTransit}
		}},
		{"bootstrap added", "spec", "bootstrap is set when a cluster is created", func(c *v1alpha1.OpenBaoCluster) {
			c.Spec.Bootstrap = &v1alpha1.BootstrapSpec{FromBackup: &v1alpha1.BackupBootstrap{Latest: true,
				Target:             v1alpha1.BackupTarget{Endpoint: "https://s3.example.com", Bucket: "backups"},
				UnsealKeySecretRef: &v1alpha1.SecretKeyRef{Name: "k"}}}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			changed := c.DeepCopy()
			tc.change(changed)
			err := k8s.Update(ctx, changed)
			if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), tc.field) || !strings.Contains(err.Error(), tc.phrase) {
				t.Fatalf("update: got %v, want Invalid naming %s", err, tc.field)
			}
		})
	}
	if err := k8s.Get(ctx, client.ObjectKeyFromObject(c), c); err != nil {
		t.Fatal(err)
	}
}
