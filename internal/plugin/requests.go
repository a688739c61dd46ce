package plugin

import (
	"context"
	"errors"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/openbao/operator/api/v1alpha1"
)

// DefaultPollInterval is how often --wait reads the cluster again.
const DefaultPollInterval = 2 * time.Second

// ErrWaitTimedOut: --wait gave up before the operator showed the request
// handled; the request stays, and the operator still carries it out.
var ErrWaitTimedOut = errors.New("timed out")

// ErrOperatorManagedOnly: rotate-certs on a cluster whose certificate the
// operator does not issue.
var ErrOperatorManagedOnly = errors.New("the operator does not issue this cluster's certificate")

// newRequest is a value for an imperative field: the time, which no
// earlier request had, moved on by a nanosecond if the field holds it.
func newRequest(now time.Time, current string) string {
	request := now.UTC().Format(time.RFC3339Nano)
	if request == current {
		request = now.UTC().Add(time.Nanosecond).Format(time.RFC3339Nano)
	}
	return request
}

// RequestRestart writes spec.restartRequest, and nothing else, with a
// merge patch: the operator restarts every server once per new value,
// through the rollout. It returns the request, which status.restart shows
// once the operator handled it.
func (c *Commands) RequestRestart(ctx context.Context, name string) (string, error) {
	cluster, err := c.cluster(ctx, name)
	if err != nil {
		return "", err
	}
	request := newRequest(c.Now(), cluster.Spec.RestartRequest)
	patch := client.RawPatch(types.MergePatchType, fmt.Appendf(nil, `{"spec":{"restartRequest":%q}}`, request))
	if err := c.Client.Patch(ctx, cluster, patch); err != nil {
		return "", fmt.Errorf("set spec.restartRequest of %s: %w", name, err)
	}
	return request, nil
}

// RequestCertRotation writes spec.tls.rotateRequest with a merge patch:
// the operator reissues the server certificate it issues once per new
// value. A cluster in External mode is refused here, as the API server
// would refuse it: its certificate is renewed where it is issued.
func (c *Commands) RequestCertRotation(ctx context.Context, name string) (string, error) {
	cluster, err := c.cluster(ctx, name)
	if err != nil {
		return "", err
	}
	if cluster.Spec.TLS.Mode == v1alpha1.TLSModeExternal {
		return "", fmt.Errorf("%w: %s/%s has spec.tls.mode External; renew the Secret named by spec.tls.external.serverSecretRef "+
			"where it is issued (for example cmctl renew), and the servers reload it", ErrOperatorManagedOnly, c.Namespace, name)
	}
	request := newRequest(c.Now(), cluster.Spec.TLS.RotateRequest)
	patch := client.RawPatch(types.MergePatchType, fmt.Appendf(nil, `{"spec":{"tls":{"rotateRequest":%q}}}`, request))
	if err := c.Client.Patch(ctx, cluster, patch); err != nil {
		return "", fmt.Errorf("set spec.tls.rotateRequest of %s: %w", name, err)
	}
	return request, nil
}

// RestartDone says status shows the restart request handled and every
// server running the template that carries it.
func RestartDone(c *v1alpha1.OpenBaoCluster, request string) bool {
	r := c.Status.Restart
	return r != nil && r.Request == request && r.CompletedTime != nil
}

// RotationDone says status shows the server certificate reissued for the
// request.
func RotationDone(c *v1alpha1.OpenBaoCluster, request string) bool {
	t := c.Status.TLS
	return t != nil && t.RotateRequest == request
}

// WaitFor reads the cluster every PollInterval until done says so, or
// timeout passes; what names what it waits for, in the error.
func (c *Commands) WaitFor(ctx context.Context, name, what string, timeout time.Duration,
	done func(*v1alpha1.OpenBaoCluster) bool) error {
	interval := c.PollInterval
	if interval <= 0 {
		interval = DefaultPollInterval
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		cluster, err := c.cluster(ctx, name)
		switch {
		case err == nil && done(cluster):
			return nil
		case err != nil && ctx.Err() == nil:
			return err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w after %s waiting for %s of %s/%s; the request stands and the operator still carries it out "+
				"(kubectl openbao status %s)", ErrWaitTimedOut, timeout, what, c.Namespace, name, name)
		case <-tick.C:
		}
	}
}
