package pki

import (
	"fmt"
	"io"
	"time"
)

// Execute carries out a Plan from Decide for the same observed material,
// spec and time, and returns the complete material to write: the CA Secret
// and the server Secret (each replaced as a whole, so a reader never sees a
// certificate without its key). Material the Plan keeps is returned byte for
// byte, so a Fresh plan yields the observed material unchanged.
func Execute(plan Plan, obs Observed, spec Spec, now time.Time, random io.Reader) (Observed, error) {
	if err := spec.Validate(); err != nil {
		return Observed{}, fmt.Errorf("invalid TLS spec: %w", err)
	}
	s := inspect(obs)
	out := obs
	active, next, err := applyCA(plan.CA, s, spec, now, random)
	if err != nil {
		return Observed{}, err
	}
	previous := obs.CA.BundlePEM
	if s.ca != nil {
		// The outgoing CA stays trusted until it expires.
		previous = append(append([]byte{}, s.ca.certPEM...), previous...)
	}
	if plan.CA != CAKeep {
		out.CA = CAMaterial{CertPEM: active.certPEM, KeyPEM: active.keyPEM}
		if next != nil {
			out.CA.NextCertPEM, out.CA.NextKeyPEM = next.certPEM, next.keyPEM
		}
	}
	if plan.IssueServer {
		if active == nil {
			return Observed{}, fmt.Errorf("issue server certificate: no usable CA (plan %s does not replace it)", plan.CA)
		}
		leaf, err := issueServer(active, spec, now, random)
		if err != nil {
			return Observed{}, err
		}
		out.Server.CertPEM, out.Server.KeyPEM = leaf.certPEM, leaf.keyPEM
	}
	if plan.UpdateBundle {
		bundle := BundlePEM(out.CA.CertPEM, out.CA.NextCertPEM, previous, now)
		out.CA.BundlePEM, out.Server.BundlePEM = bundle, bundle
	}
	return out, nil
}

// applyCA returns the signing CA and the successor (nil when none) after the
// CA action.
func applyCA(action CAAction, s state, spec Spec, now time.Time, random io.Reader) (active, next *pair, err error) {
	switch action {
	case CAKeep:
		return s.ca, s.next, nil
	case CAReplace:
		active, err = newCA(spec, now, random)
		return active, nil, err
	case CAStageNext:
		next, err = newCA(spec, now, random)
		return s.ca, next, err
	case CAPromoteNext:
		return s.next, nil, nil
	}
	return nil, nil, fmt.Errorf("unknown CA action %d", action)
}
