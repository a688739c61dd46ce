package pki

import (
	"errors"
	"fmt"
	"strings"
	"time"
)

// Reason is a CamelCase cause for a Plan, fit for an event or condition reason.
type Reason string

// Reasons, in the order Decide checks them: CA causes first, then the server
// certificate's, then the bundle's.
const (
	ReasonFresh                 Reason = "Fresh"
	ReasonMissing               Reason = "Missing"
	ReasonInvalidPEM            Reason = "InvalidPEM"
	ReasonKeyMismatch           Reason = "KeyMismatch"
	ReasonExpired               Reason = "Expired"
	ReasonCANearExpiry          Reason = "CANearExpiry"
	ReasonCAPromoted            Reason = "CAPromoted"
	ReasonIssuerChanged         Reason = "IssuerChanged"
	ReasonSANsChanged           Reason = "SANsChanged"
	ReasonRotationPeriodChanged Reason = "RotationPeriodChanged"
	ReasonWithinRotationWindow  Reason = "WithinRotationWindow"
	ReasonBundleChanged         Reason = "BundleChanged"
	// ReasonRotateRequested: a person asked for a new server certificate
	// (spec.tls.rotateRequest); see Plan.Requested.
	ReasonRotateRequested Reason = "RotateRequested"
)

// CAAction is what happens to the CA.
type CAAction int

const (
	// CAKeep leaves the CA as it is.
	CAKeep CAAction = iota
	// CAReplace creates a new CA that signs at once, with no overlap: only
	// when the current one is missing, unreadable or expired.
	CAReplace
	// CAStageNext creates a successor and publishes it in the bundle while
	// the current CA keeps signing.
	CAStageNext
	// CAPromoteNext makes the published successor the signing CA.
	CAPromoteNext
)

func (a CAAction) String() string {
	return [...]string{"Keep", "Replace", "StageNext", "PromoteNext"}[a]
}

// Plan is what Decide found to do. Reason is the first cause found; Message
// lists every cause, for humans.
type Plan struct {
	CA           CAAction
	IssueServer  bool
	UpdateBundle bool
	Reason       Reason
	Message      string
	// NextCheck, set when there is nothing to do, is the earliest time at
	// which Decide would answer differently for the same observed material.
	NextCheck time.Time
}

// NothingToDo reports whether the Secrets are already as they should be.
func (p Plan) NothingToDo() bool {
	return p.CA == CAKeep && !p.IssueServer && !p.UpdateBundle
}

// Requested adds a person's request for a new server certificate to a
// Plan from Decide: the server certificate is reissued under the signing
// CA, whatever its age. The CA is left to Decide: a new CA must be
// published in the bundle before it signs, which no request can hurry. A
// Plan that reissues anyway keeps its reason and says it serves the
// request too.
func (p Plan) Requested(request string) Plan {
	msg := fmt.Sprintf("spec.tls.rotateRequest %s asks for a new server certificate", request)
	if p.NothingToDo() {
		p.Reason, p.Message, p.NextCheck = ReasonRotateRequested, msg+"; reissuing", time.Time{}
	} else {
		p.Message += "; " + msg
	}
	p.IssueServer = true
	return p
}

// state is the observed material parsed once for Decide and Execute.
type state struct {
	ca, next, server       *pair
	caErr, nextErr, srvErr error
}

func inspect(obs Observed) state {
	var s state
	s.ca, s.caErr = parsePair(obs.CA.CertPEM, obs.CA.KeyPEM)
	if s.caErr == nil && !s.ca.cert.IsCA {
		s.ca, s.caErr = nil, fmt.Errorf("%w: certificate is not a CA", errInvalidPEM)
	}
	s.next, s.nextErr = parsePair(obs.CA.NextCertPEM, obs.CA.NextKeyPEM)
	s.server, s.srvErr = parsePair(obs.Server.CertPEM, obs.Server.KeyPEM)
	return s
}

// decision accumulates causes; the first one becomes the Plan's Reason.
type decision struct {
	plan     Plan
	messages []string
}

func (d *decision) add(r Reason, format string, args ...any) {
	if d.plan.Reason == "" {
		d.plan.Reason = r
	}
	d.messages = append(d.messages, fmt.Sprintf(format, args...))
}

// Decide compares the observed material with the spec at now and returns
// what to issue. It is pure: same inputs, same Plan.
func Decide(obs Observed, spec Spec, now time.Time) Plan {
	s := inspect(obs)
	d := &decision{}
	decideCA(d, s, spec, now)
	decideServer(d, s, spec, now)
	decideBundle(d, s, obs, now)
	if d.plan.Reason == "" {
		d.plan.Reason = ReasonFresh
		d.messages = []string{"CA and server certificate are valid and match the spec"}
		d.plan.NextCheck = nextCheck(s, obs, spec, now)
	}
	d.plan.Message = strings.Join(d.messages, "; ")
	return d.plan
}

// problemReason maps a parse problem to its Reason.
func problemReason(err error) Reason {
	switch {
	case errors.Is(err, errMissing):
		return ReasonMissing
	case errors.Is(err, errKeyMismatch):
		return ReasonKeyMismatch
	default:
		return ReasonInvalidPEM
	}
}

func decideCA(d *decision, s state, spec Spec, now time.Time) {
	switch {
	case s.caErr != nil:
		d.plan.CA = CAReplace
		d.add(problemReason(s.caErr), "CA Secret: %v; issuing a new CA", s.caErr)
	case !now.Before(s.ca.cert.NotAfter):
		d.plan.CA = CAReplace
		d.add(ReasonExpired, "CA expired at %s; issuing a new CA without overlap", stamp(s.ca.cert.NotAfter))
	case s.nextErr != nil && !errors.Is(s.nextErr, errMissing):
		d.plan.CA = CAStageNext
		d.add(problemReason(s.nextErr), "successor CA: %v; issuing a new successor", s.nextErr)
	case s.next != nil && !now.Before(promoteAt(s.next, spec)):
		d.plan.CA = CAPromoteNext
		d.add(ReasonCAPromoted, "successor CA published since %s; it now signs", stamp(s.next.cert.NotBefore.Add(ClockSkew)))
	case s.next == nil && !now.Before(s.ca.cert.NotAfter.Add(-spec.CARenewBefore())):
		d.plan.CA = CAStageNext
		d.add(ReasonCANearExpiry, "CA expires at %s, within %s; publishing a successor CA", stamp(s.ca.cert.NotAfter), spec.CARenewBefore())
	}
}

// promoteAt is when a published successor starts signing: its issue time
// (NotBefore is backdated by ClockSkew) plus the propagation delay.
func promoteAt(next *pair, spec Spec) time.Time {
	return next.cert.NotBefore.Add(ClockSkew + spec.Propagation())
}

func decideServer(d *decision, s state, spec Spec, now time.Time) {
	if d.plan.CA == CAReplace || d.plan.CA == CAPromoteNext {
		d.plan.IssueServer = true
		d.add(ReasonIssuerChanged, "the signing CA changes; reissuing the server certificate")
		return
	}
	reason, msg := serverProblem(s, spec, now)
	if reason != "" {
		d.plan.IssueServer = true
		d.add(reason, "server certificate: %s; reissuing", msg)
	}
}

// serverProblem names why the server certificate must be reissued under the
// current CA, or returns an empty Reason.
func serverProblem(s state, spec Spec, now time.Time) (Reason, string) {
	if s.srvErr != nil {
		return problemReason(s.srvErr), s.srvErr.Error()
	}
	leaf := s.server.cert
	if err := leaf.CheckSignatureFrom(s.ca.cert); err != nil {
		return ReasonIssuerChanged, "not signed by the current CA"
	}
	if !now.Before(leaf.NotAfter) {
		return ReasonExpired, "expired at " + stamp(leaf.NotAfter)
	}
	if have, want := normalizeSANs(leaf.DNSNames, leaf.IPAddresses), DesiredSANs(spec); !have.Equal(want) {
		return ReasonSANsChanged, "SANs changed: " + have.diff(want)
	}
	if leaf.NotAfter.Sub(leaf.NotBefore) > spec.rotationPeriod()+ClockSkew+time.Minute {
		return ReasonRotationPeriodChanged, fmt.Sprintf("valid for longer than the rotation period %s", spec.rotationPeriod())
	}
	// A leaf clamped to its CA's expiry cannot be improved by reissuing under
	// the same CA; the CA's renewal will replace it.
	clamped := !leaf.NotAfter.Before(s.ca.cert.NotAfter)
	if !clamped && !now.Before(leaf.NotAfter.Add(-spec.RenewBefore())) {
		return ReasonWithinRotationWindow, fmt.Sprintf("expires at %s, within the rotation window of %s", stamp(leaf.NotAfter), spec.RenewBefore())
	}
	return "", ""
}

// decideBundle flags a bundle that differs from the one to publish, in
// either Secret; a CA change always rewrites it.
func decideBundle(d *decision, s state, obs Observed, now time.Time) {
	if d.plan.CA != CAKeep {
		d.plan.UpdateBundle = true
		return
	}
	want := BundlePEM(s.ca.certPEM, nextCertPEM(s), obs.CA.BundlePEM, now)
	if string(want) == string(obs.CA.BundlePEM) && string(want) == string(obs.Server.BundlePEM) {
		return
	}
	d.plan.UpdateBundle = true
	for _, c := range parseCerts(obs.CA.BundlePEM) {
		if !now.Before(c.NotAfter) {
			d.add(ReasonBundleChanged, "previous CA %q expired at %s; dropping it from the bundle", c.Subject.CommonName, stamp(c.NotAfter))
			return
		}
	}
	d.add(ReasonBundleChanged, "a Secret's CA bundle is stale or unreadable; rewriting it")
}

func nextCertPEM(s state) []byte {
	if s.next == nil {
		return nil
	}
	return s.next.certPEM
}

// nextCheck is the earliest instant at which a Fresh decision may change.
func nextCheck(s state, obs Observed, spec Spec, now time.Time) time.Time {
	times := []time.Time{
		s.server.cert.NotAfter.Add(-spec.RenewBefore()),
		s.server.cert.NotAfter,
		s.ca.cert.NotAfter.Add(-spec.CARenewBefore()),
		s.ca.cert.NotAfter,
	}
	if s.next != nil {
		times = append(times, promoteAt(s.next, spec))
	}
	for _, c := range parseCerts(obs.CA.BundlePEM) {
		times = append(times, c.NotAfter)
	}
	var first time.Time
	for _, t := range times {
		if t.After(now) && (first.IsZero() || t.Before(first)) {
			first = t
		}
	}
	return first
}

func stamp(t time.Time) string { return t.UTC().Format(time.RFC3339) }
