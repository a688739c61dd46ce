package baoconfig

import (
	"sort"

	"github.com/hashicorp/hcl/v2/hclwrite"
)

// SealType names an OpenBao seal.
type SealType string

// The seals the operator renders.
const (
	SealStatic        SealType = "static"
	SealAWSKMS        SealType = "awskms"
	SealGCPCKMS       SealType = "gcpckms"
	SealAzureKeyVault SealType = "azurekeyvault"
	SealTransit       SealType = "transit"
)

// Seal is the seal stanza.
type Seal struct {
	Type SealType
	// Static seal: the key is always a file (a mounted Secret), never a value
	// in the configuration, which lands in a ConfigMap.
	KeyID           string // current_key_id
	KeyFile         string // default DefaultSealKeyFile
	PreviousKeyID   string // set both Previous fields while rotating the key
	PreviousKeyFile string
	// Options are the attributes of a KMS seal (awskms, gcpckms,
	// azurekeyvault, transit), for example region and kms_key_id.
	Options map[string]string
}

// sealOptions lists, per KMS seal, the attributes its go-kms-wrapping
// wrapper reads (v2 wrappers pinned by OpenBao 2.4.0). The wrappers ignore
// unknown attributes, so a typo would silently fall back to a default;
// this package rejects it instead. Credentials are left out on purpose:
// they come from the pod's environment or mounted files (AWS_*,
// AZURE_CLIENT_SECRET, GOOGLE_APPLICATION_CREDENTIALS, BAO_TOKEN or
// token files), never from config.hcl.
var sealOptions = map[SealType][]string{
	SealAWSKMS: {"disallow_env_vars", "endpoint", "key_not_required", "kms_key_id", "region",
		"role_arn", "role_session_name", "shared_creds_filename", "shared_creds_profile", "web_identity_token_file"},
	SealGCPCKMS: {"credentials", "crypto_key", "key_not_required", "key_ring", "project", "region", "user_agent"},
	SealAzureKeyVault: {"client_id", "disallow_env_vars", "environment", "key_name", "key_not_required",
		"resource", "tenant_id", "vault_name"},
	SealTransit: {"address", "disable_renewal", "key_id_prefix", "key_name", "mount_path", "namespace",
		"tls_ca_cert", "tls_ca_path", "tls_client_cert", "tls_client_key", "tls_server_name", "tls_skip_verify"},
}

// secretSealOptions are attributes that would put a credential into the
// ConfigMap; the error says where they belong instead.
var secretSealOptions = map[string]string{
	"access_key":    "AWS_ACCESS_KEY_ID",
	"secret_key":    "AWS_SECRET_ACCESS_KEY",
	"session_token": "AWS_SESSION_TOKEN",
	"client_secret": "AZURE_CLIENT_SECRET",
	"token":         "BAO_TOKEN",
}

func renderSeal(body *hclwrite.Body, s Seal) error {
	body.AppendNewline()
	if s.Type == SealStatic {
		return renderStaticSeal(body, s)
	}
	allowed, ok := sealOptions[s.Type]
	if !ok {
		return invalidf("seal: unknown type %q", s.Type)
	}
	if s.KeyID != "" || s.KeyFile != "" || s.PreviousKeyID != "" || s.PreviousKeyFile != "" {
		return invalidf("seal: key fields are for the static seal, not %s", s.Type)
	}
	keys := make([]string, 0, len(s.Options))
	for k := range s.Options {
		if env, secret := secretSealOptions[k]; secret {
			return invalidf("seal: option %q is a credential; pass it through the environment (%s) instead", k, env)
		}
		if !contains(allowed, k) {
			return invalidf("seal: option %q is not read by the %s seal (known: %v)", k, s.Type, allowed)
		}
		keys = append(keys, k)
	}
	sort.Strings(keys)
	sb := body.AppendNewBlock("seal", []string{string(s.Type)}).Body()
	for _, k := range keys {
		sb.SetAttributeRaw(k, stringTokens(s.Options[k]))
	}
	return nil
}

func renderStaticSeal(body *hclwrite.Body, s Seal) error {
	if len(s.Options) > 0 {
		return invalidf("seal: the static seal takes no options")
	}
	if s.KeyID == "" {
		return invalidf("seal: the static seal needs a key id")
	}
	if (s.PreviousKeyID == "") != (s.PreviousKeyFile == "") {
		return invalidf("seal: a previous static key needs both its id and its file")
	}
	if s.PreviousKeyID != "" && s.PreviousKeyID == s.KeyID {
		return invalidf("seal: the previous key id %q equals the current one", s.KeyID)
	}
	sb := body.AppendNewBlock("seal", []string{string(SealStatic)}).Body()
	sb.SetAttributeRaw("current_key_id", stringTokens(s.KeyID))
	sb.SetAttributeRaw("current_key", stringTokens("file://"+orDefault(s.KeyFile, DefaultSealKeyFile)))
	if s.PreviousKeyID != "" {
		sb.SetAttributeRaw("previous_key_id", stringTokens(s.PreviousKeyID))
		sb.SetAttributeRaw("previous_key", stringTokens("file://"+s.PreviousKeyFile))
	}
	return nil
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}
