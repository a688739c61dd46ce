package imageverify

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/docker/cli/cli/config"
	"github.com/docker/cli/cli/config/configfile"
	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
)

// PullSecret is one imagePullSecret's content, by its Secret type.
type PullSecret struct {
	// Name is the Secret's name, for messages.
	Name string
	// DockerConfigJSON is the .dockerconfigjson key of a
	// kubernetes.io/dockerconfigjson Secret; DockerCfg the .dockercfg key
	// of the legacy kubernetes.io/dockercfg type.
	DockerConfigJSON, DockerCfg []byte
}

// NewKeychain builds the credentials of a cluster's imagePullSecrets, tried
// in order as the kubelet does: the first that holds the registry wins.
// Errors name the Secret, never its content.
func NewKeychain(secrets []PullSecret) (authn.Keychain, error) {
	var chains []authn.Keychain
	for _, s := range secrets {
		raw := s.DockerConfigJSON
		if len(raw) == 0 && len(s.DockerCfg) > 0 {
			// .dockercfg is the "auths" map on its own.
			wrapped, err := json.Marshal(map[string]json.RawMessage{"auths": s.DockerCfg})
			if err != nil {
				return nil, fmt.Errorf("%w: imagePullSecret %s: .dockercfg is not JSON", ErrInvalidPolicy, s.Name)
			}
			raw = wrapped
		}
		if len(raw) == 0 {
			return nil, fmt.Errorf("%w: imagePullSecret %s holds neither .dockerconfigjson nor .dockercfg", ErrInvalidPolicy, s.Name)
		}
		cf, err := config.LoadFromReader(bytes.NewReader(raw))
		if err != nil {
			return nil, fmt.Errorf("%w: imagePullSecret %s is not a docker config", ErrInvalidPolicy, s.Name)
		}
		chains = append(chains, configKeychain{cf})
	}
	return authn.NewMultiKeychain(chains...), nil
}

// configKeychain answers from one docker config, as authn's default
// keychain does from ~/.docker/config.json.
type configKeychain struct{ cf *configfile.ConfigFile }

func (k configKeychain) Resolve(target authn.Resource) (authn.Authenticator, error) {
	key := target.RegistryStr()
	if key == name.DefaultRegistry {
		key = authn.DefaultAuthKey
	}
	cfg, err := k.cf.GetAuthConfig(key)
	if err != nil {
		return nil, fmt.Errorf("read credentials for %s: %w", target.RegistryStr(), err)
	}
	empty := cfg.Username == "" && cfg.Password == "" && cfg.Auth == "" && cfg.IdentityToken == "" && cfg.RegistryToken == ""
	if empty {
		return authn.Anonymous, nil
	}
	return authn.FromConfig(authn.AuthConfig{
		Username: cfg.Username, Password: cfg.Password, Auth: cfg.Auth,
		IdentityToken: cfg.IdentityToken, RegistryToken: cfg.RegistryToken,
	}), nil
}
