package envtest_test

import (
	"context"
	"fmt"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/openbao/operator/api/v1alpha1"
	"github.com/openbao/operator/internal/sealkey"
)

// TestStaticSealKeyIsCreatedOnceAndKeptWithTheData: the key has no owner
// whatever the policy, so that garbage collection never takes it; the
// finalizer deletes it when the policy in force at deletion says so.
func TestStaticSealKeyIsCreatedOnceAndKeptWithTheData(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name, policy string
		owned        bool
	}{
		{"sealkey-retain", "Retain", false},
		{"sealkey-deletepvcs", "DeletePVCs", false},
		{"sealkey-deleteall", "DeleteAll", false},
	} {
		t.Run(tc.policy, func(t *testing.T) {
			c := newCluster(t, managedNamespace, fmt.Sprintf(`
metadata: {name: %s}
spec: {version: 2.4.0, deletionPolicy: %s}
`, tc.name, tc.policy))
			if err := k8s.Create(ctx, c); err != nil {
				t.Fatal(err)
			}
			key := &corev1.Secret{}
			eventually(t, wait, "unseal key Secret exists", func() error {
				return k8s.Get(ctx, client.ObjectKey{Namespace: managedNamespace, Name: c.UnsealKeySecretName()}, key)
			})
			if n := len(key.Data[sealkey.DataKey]); n != 32 {
				t.Fatalf("static key holds %d bytes, want exactly 32", n)
			}
			if owned := metav1.GetControllerOf(key) != nil; owned != tc.owned {
				t.Fatalf("deletionPolicy %s: key Secret owned=%v, want %v", tc.policy, owned, tc.owned)
			}
			if key.Immutable == nil || !*key.Immutable {
				t.Error("the key Secret is not immutable")
			}
		})
	}
}

func TestAnInvalidExistingKeyIsReportedNeverReplaced(t *testing.T) {
	ctx := context.Background()
	c := newCluster(t, managedNamespace, `
metadata: {name: badkey}
spec: {version: 2.4.0}
`)
	// A key with a trailing newline, as `echo` would write it.
	bad := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: c.UnsealKeySecretName(), Namespace: managedNamespace},
		Data:       map[string][]byte{sealkey.DataKey: []byte("0123456789abcdef0123456789abcdef\n")},
	}
	if err := k8s.Create(ctx, bad); err != nil {
		t.Fatal(err)
	}
	if err := k8s.Create(ctx, c); err != nil {
		t.Fatal(err)
	}
	eventually(t, wait, "SealReady=False StaticKeyInvalid", func() error {
		cond, err := condition(ctx, c, v1alpha1.ConditionSealReady)
		if err != nil {
			return err
		}
		if cond.Status != metav1.ConditionFalse || cond.Reason != v1alpha1.ReasonStaticKeyInvalid {
			return fmt.Errorf("SealReady %s/%s", cond.Status, cond.Reason)
		}
		return nil
	})
	got := &corev1.Secret{}
	if err := k8s.Get(ctx, client.ObjectKeyFromObject(bad), got); err != nil {
		t.Fatal(err)
	}
	if string(got.Data[sealkey.DataKey]) != string(bad.Data[sealkey.DataKey]) {
		t.Fatal("the operator replaced an existing seal key")
	}
}

func TestKMSSealCreatesNoKeySecret(t *testing.T) {
	ctx := context.Background()
	c := newCluster(t, managedNamespace, `
metadata: {name: kms}
spec:
  version: 2.4.0
  unseal: {type: awskms, options: {region: eu-west-1, kms_key_id: alias/x}, credentialsSecretRef: {name: aws}}
`)
	if err := k8s.Create(ctx, c); err != nil {
		t.Fatal(err)
	}
	eventually(t, wait, "SealReady=True ExternalSeal", func() error {
		cond, err := condition(ctx, c, v1alpha1.ConditionSealReady)
		if err != nil {
			return err
		}
		if cond.Reason != v1alpha1.ReasonExternalSeal {
			return fmt.Errorf("SealReady reason %s", cond.Reason)
		}
		return nil
	})
	err := k8s.Get(ctx, client.ObjectKey{Namespace: managedNamespace, Name: c.UnsealKeySecretName()}, &corev1.Secret{})
	if !apierrors.IsNotFound(err) {
		t.Fatalf("a KMS-sealed cluster got a static key Secret (%v)", err)
	}
}

// TestAKeyTheOperatorDidNotWriteIsAdoptedOnlyWhenLabelled: a well-formed key
// a person created is neither used nor replaced until it carries the
// cluster label, the documented way to hand the operator an existing key.
func TestAKeyTheOperatorDidNotWriteIsAdoptedOnlyWhenLabelled(t *testing.T) {
	ctx := context.Background()
	c := newCluster(t, managedNamespace, `
metadata: {name: ownkey}
spec: {version: 2.4.0}
`)
	mine := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: c.UnsealKeySecretName(), Namespace: managedNamespace},
		Data:       map[string][]byte{sealkey.DataKey: []byte("0123456789abcdef0123456789abcdef")},
	}
	if err := k8s.Create(ctx, mine); err != nil {
		t.Fatal(err)
	}
	if err := k8s.Create(ctx, c); err != nil {
		t.Fatal(err)
	}
	sealReason := func(want string) func() error {
		return func() error {
			cond, err := condition(ctx, c, v1alpha1.ConditionSealReady)
			if err != nil {
				return err
			}
			if cond.Reason != want {
				return fmt.Errorf("SealReady %s/%s", cond.Status, cond.Reason)
			}
			return nil
		}
	}
	eventually(t, wait, "SealReady=False StaticKeyNotAdopted", sealReason(v1alpha1.ReasonStaticKeyNotAdopted))
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: managedNamespace, Name: c.StatefulSetName()}, &appsv1.StatefulSet{}); !apierrors.IsNotFound(err) {
		t.Fatalf("the StatefulSet was applied with a key nobody adopted (%v)", err)
	}
	if err := k8s.Get(ctx, client.ObjectKeyFromObject(mine), mine); err != nil {
		t.Fatal(err)
	}
	mine.Labels = map[string]string{v1alpha1.LabelCluster: c.Name, v1alpha1.LabelManagedBy: v1alpha1.ManagedByValue}
	if err := k8s.Update(ctx, mine); err != nil {
		t.Fatal(err)
	}
	// The label brings the Secret into the operator's cache, and its
	// arrival starts a pass.
	eventually(t, wait, "SealReady=True StaticKeyReady", sealReason(v1alpha1.ReasonStaticKeyReady))
	got := &corev1.Secret{}
	if err := k8s.Get(ctx, client.ObjectKeyFromObject(mine), got); err != nil {
		t.Fatal(err)
	}
	if string(got.Data[sealkey.DataKey]) != "0123456789abcdef0123456789abcdef" {
		t.Fatal("the operator replaced the key it adopted")
	}
}

// TestABootstrapClusterStartsOnlyOnTheSourcesKey: a cluster formed from a
// backup has no StatefulSet while the source's key Secret is missing, then
// copies exactly that key into its own Secret.
func TestABootstrapClusterStartsOnlyOnTheSourcesKey(t *testing.T) {
	ctx := context.Background()
	c := newCluster(t, managedNamespace, `
metadata: {name: frombackup}
spec:
  version: 2.4.0
  bootstrap:
    fromBackup:
      target: {endpoint: "https://s3.example.com", bucket: backups}
      latest: true
      unsealKeySecretRef: {name: source-seal-key}
`)
	if err := k8s.Create(ctx, c); err != nil {
		t.Fatal(err)
	}
	eventually(t, wait, "SealReady=False SourceKeyMissing", func() error {
		cond, err := condition(ctx, c, v1alpha1.ConditionSealReady)
		if err != nil {
			return err
		}
		if cond.Status != metav1.ConditionFalse || cond.Reason != v1alpha1.ReasonSourceKeyMissing {
			return fmt.Errorf("SealReady %s/%s", cond.Status, cond.Reason)
		}
		return nil
	})
	sts := &appsv1.StatefulSet{}
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: managedNamespace, Name: c.Name}, sts); !apierrors.IsNotFound(err) {
		t.Fatalf("a StatefulSet exists before the source's key: %v", err)
	}
	sourceKey := []byte("0123456789abcdef0123456789abcdef")
	if err := k8s.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "source-seal-key", Namespace: managedNamespace},
		Data: map[string][]byte{sealkey.DataKey: sourceKey}}); err != nil {
		t.Fatal(err)
	}
	key := &corev1.Secret{}
	eventually(t, wait, "the source's key copied", func() error {
		if err := k8s.Get(ctx, client.ObjectKey{Namespace: managedNamespace, Name: c.UnsealKeySecretName()}, key); err != nil {
			return err
		}
		if string(key.Data[sealkey.DataKey]) != string(sourceKey) {
			return fmt.Errorf("the key Secret holds another key")
		}
		return k8s.Get(ctx, client.ObjectKey{Namespace: managedNamespace, Name: c.Name}, sts)
	})
}
