package v1alpha1_test

import (
	"testing"

	"github.com/openbao/operator/api/v1alpha1"
)

// TestAJWTAuthRoleDefaultsToTheRoleTheOperatorCreates: LoginRole is the one
// place the default of spec.backup.jwtAuthRole and spec.upgrade.jwtAuthRole
// is decided; a token replaces the login.
func TestAJWTAuthRoleDefaultsToTheRoleTheOperatorCreates(t *testing.T) {
	token := &v1alpha1.SecretKeyRef{Name: "t"}
	for _, tc := range []struct {
		name    string
		role    string
		token   *v1alpha1.SecretKeyRef
		backup  string
		upgrade string
	}{
		{"neither role nor token logs in as the operator's role", "", nil, "backup", "upgrade"},
		{"a role of the user's own is used as it is", "mine", nil, "mine", "mine"},
		{"a token means no JWT login", "", token, "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := &v1alpha1.BackupSpec{JWTAuthRole: tc.role, TokenSecretRef: tc.token}
			u := &v1alpha1.UpgradeSpec{JWTAuthRole: tc.role, TokenSecretRef: tc.token}
			if got := b.LoginRole(); got != tc.backup {
				t.Errorf("backup logs in as %q, want %q", got, tc.backup)
			}
			if got := u.LoginRole(); got != tc.upgrade {
				t.Errorf("upgrade logs in as %q, want %q", got, tc.upgrade)
			}
		})
	}
}

// TestASecretKeyRefFallsBackToTheFieldsDefaultKey.
func TestASecretKeyRefFallsBackToTheFieldsDefaultKey(t *testing.T) {
	var none *v1alpha1.SecretKeyRef
	for _, tc := range []struct {
		name string
		ref  *v1alpha1.SecretKeyRef
		want string
	}{
		{"no reference", none, "token"},
		{"a reference without a key", &v1alpha1.SecretKeyRef{Name: "s"}, "token"},
		{"a reference naming a key", &v1alpha1.SecretKeyRef{Name: "s", Key: "bao-token"}, "bao-token"},
	} {
		if got := tc.ref.KeyOr(v1alpha1.DefaultTokenKey); got != tc.want {
			t.Errorf("%s: key %q, want %q", tc.name, got, tc.want)
		}
	}
}
