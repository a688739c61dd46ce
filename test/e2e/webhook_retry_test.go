package e2e_test

import (
	"context"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// webhookRetrying retries a write the API server could not send to the
// operator's admission webhook (failure policy Fail): tests kill the
// operator on purpose, and writes of the tests running beside them would
// otherwise fail while it restarts, where a user would simply retry.
type webhookRetrying struct{ client.Client }

// webhookDownFor bounds the retries: an operator pod is back in seconds.
const webhookDownFor = time.Minute

func (c webhookRetrying) Create(ctx context.Context, obj client.Object, opts ...client.CreateOption) error {
	return retryWhileWebhookDown(func() error { return c.Client.Create(ctx, obj, opts...) })
}

func (c webhookRetrying) Update(ctx context.Context, obj client.Object, opts ...client.UpdateOption) error {
	return retryWhileWebhookDown(func() error { return c.Client.Update(ctx, obj, opts...) })
}

func (c webhookRetrying) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
	return retryWhileWebhookDown(func() error { return c.Client.Patch(ctx, obj, patch, opts...) })
}

func retryWhileWebhookDown(write func() error) error {
	deadline := time.Now().Add(webhookDownFor)
	for {
		err := write()
		if err == nil || !webhookUnreachable(err) || time.Now().After(deadline) {
			return err
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// webhookUnreachable: the API server answers 500 with this text when it
// cannot call a webhook; there is no finer status to branch on.
func webhookUnreachable(err error) bool {
	return apierrors.IsInternalError(err) && strings.Contains(err.Error(), "failed calling webhook")
}
