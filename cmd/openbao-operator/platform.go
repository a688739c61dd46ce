package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"

	"github.com/openbao/operator/controllers"
	"github.com/openbao/operator/internal/delegated"
	"github.com/openbao/operator/internal/imageverify"
)

// platformFlags are what the platform sets at install and no tenant can
// change: the allow-list of the fields the operator copies into its Pods,
// Services and Ingresses (issue 34, item 8), and the signature every image
// must carry (item 3). Each flag defaults to an environment variable of
// the same name, upper case, the chart's way.
type platformFlags struct {
	fields delegated.Policy
	// The platform's signature policy: a key file, or a keyless identity
	// with its trusted root. Files are read once, at start.
	keyFile, issuer, subject, subjectRegExp, trustedRootFile string
}

func (p *platformFlags) bind(fs *flag.FlagSet) {
	list := func(dst *[]string, name, usage string) {
		*dst = delegated.ParseList(os.Getenv(envName(name)))
		fs.Func(name, usage+" (default "+envName(name)+")", func(v string) error { *dst = delegated.ParseList(v); return nil })
	}
	const without = "; a tenant sets others only if it may create %s in the namespace itself (asked at admission)"
	list(&p.fields.PriorityClasses, "allowed-priority-classes",
		"comma-separated priority classes a cluster's spec.priorityClassName may name"+fmt.Sprintf(without, "Pods"))
	list(&p.fields.TolerationKeys, "allowed-toleration-keys",
		"comma-separated taint keys a cluster's spec.tolerations may tolerate"+fmt.Sprintf(without, "Pods"))
	list(&p.fields.NodeSelectorKeys, "allowed-node-selector-keys",
		"comma-separated node label keys a cluster's spec.nodeSelector and node affinity may select by"+fmt.Sprintf(without, "Pods"))
	list(&p.fields.AnnotationPrefixes, "allowed-annotation-prefixes",
		"comma-separated prefixes of the keys of spec.service.annotations, spec.ingress.annotations and the serviceAccount annotations "+
			"(whose workload identity keys are always allowed)"+fmt.Sprintf(without, "Services, Ingresses or ServiceAccounts"))
	list(&p.fields.IngressClasses, "allowed-ingress-classes",
		"comma-separated ingress classes spec.ingress.className may name"+fmt.Sprintf(without, "Ingresses"))
	str := func(dst *string, name, usage string) {
		fs.StringVar(dst, name, os.Getenv(envName(name)), usage+" (default "+envName(name)+")")
	}
	str(&p.keyFile, "image-signature-public-key-file",
		"a cosign public key (PEM file) every image the operator runs for a tenant must be signed by, whatever the tenant's spec says")
	str(&p.issuer, "image-signature-issuer", "keyless: the OIDC issuer every image's signing certificate must name")
	str(&p.subject, "image-signature-subject", "keyless: the subject the certificate must name exactly")
	str(&p.subjectRegExp, "image-signature-subject-regexp", "keyless: a regular expression the certificate's subject must match")
	str(&p.trustedRootFile, "image-signature-trusted-root-file", "keyless: the Sigstore trusted root (JSON file) the certificate and its log entry are checked against")
}

// envName is a flag's environment variable: allowed-priority-classes is
// ALLOWED_PRIORITY_CLASSES.
func envName(flagName string) string {
	return strings.ToUpper(strings.ReplaceAll(flagName, "-", "_"))
}

// verification is the platform's signature policy from the flags; nil
// when none is set. A key and a keyless identity exclude each other, and a
// keyless identity needs its issuer, one subject and its trusted root.
func (p platformFlags) verification() (*controllers.PlatformVerification, error) {
	keyless := p.issuer != "" || p.subject != "" || p.subjectRegExp != "" || p.trustedRootFile != ""
	switch {
	case p.keyFile == "" && !keyless:
		return nil, nil
	case p.keyFile != "" && keyless:
		return nil, errors.New("--image-signature-public-key-file and the keyless --image-signature-* flags exclude each other")
	case p.keyFile != "":
		key, err := os.ReadFile(p.keyFile)
		if err != nil {
			return nil, fmt.Errorf("--image-signature-public-key-file: %w", err)
		}
		return checked(imageverify.Policy{PublicKey: string(key)})
	}
	if p.issuer == "" || p.trustedRootFile == "" || (p.subject == "") == (p.subjectRegExp == "") {
		return nil, errors.New("keyless image signatures need --image-signature-issuer, --image-signature-trusted-root-file " +
			"and exactly one of --image-signature-subject and --image-signature-subject-regexp")
	}
	root, err := os.ReadFile(p.trustedRootFile)
	if err != nil {
		return nil, fmt.Errorf("--image-signature-trusted-root-file: %w", err)
	}
	return checked(imageverify.Policy{Keyless: &imageverify.Identity{
		Issuer: p.issuer, Subject: p.subject, SubjectRegExp: p.subjectRegExp,
		TrustedRoot: root, TrustedRootSource: "--image-signature-trusted-root-file " + p.trustedRootFile,
	}})
}

// checked refuses at start a policy no signature could ever satisfy (a
// file that is no key, a root that is no trusted root), rather than
// holding every cluster later.
func checked(policy imageverify.Policy) (*controllers.PlatformVerification, error) {
	if err := imageverify.CheckPolicy(policy); err != nil {
		return nil, fmt.Errorf("the platform's image signature policy: %w", err)
	}
	return &controllers.PlatformVerification{Policy: policy}, nil
}
