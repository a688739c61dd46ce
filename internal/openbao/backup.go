package openbao

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// SnapshotPath is the API path of Raft snapshots.
const SnapshotPath = "sys/storage/raft/snapshot"

// Snapshot opens the snapshot stream. Only Options.Timeout's wait for the
// answer's headers applies, not a deadline for the whole body: a snapshot
// takes as long as its size needs, bounded by ctx. The redirect a standby
// answers with is not followed (it would carry the token elsewhere): it is
// a *StatusError matching ErrStandby.
func (c *client) Snapshot(ctx context.Context) (io.ReadCloser, error) {
	ctx, cancel := context.WithCancel(ctx)
	timer := time.AfterFunc(c.timeout, cancel)
	resp, err := c.do(ctx, http.MethodGet, "/v1/"+SnapshotPath)
	if !timer.Stop() { // the wait for the headers ran out: ctx is canceled
		if err == nil {
			resp.Body.Close()
		}
		cancel()
		return nil, &TransportError{Op: SnapshotPath, Err: fmt.Errorf("no answer within %s", c.timeout)}
	}
	if err != nil {
		cancel()
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		defer cancel()
		defer resp.Body.Close()
		return nil, statusError(SnapshotPath, resp)
	}
	return &cancelingBody{ReadCloser: resp.Body, cancel: cancel}, nil
}

// SnapshotForcePath installs a snapshot without OpenBao's seal check.
const SnapshotForcePath = "sys/storage/raft/snapshot-force"

// RestoreSnapshot posts body to the snapshot endpoint. No timeout but
// ctx's applies: the upload takes as long as the snapshot's size needs.
func (c *client) RestoreSnapshot(ctx context.Context, body io.Reader, force bool) error {
	op := SnapshotPath
	if force {
		op = SnapshotForcePath
	}
	// Wrapped so that the transport cannot see a length and sends chunks:
	// the final chunk goes out only at io.EOF.
	resp, err := c.doBody(ctx, http.MethodPost, "/v1/"+op, io.NopCloser(body))
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return statusError(op, resp)
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	return nil
}

// do sends one request with the token, over the client's own transport.
func (c *client) do(ctx context.Context, method, path string) (*http.Response, error) {
	return c.doBody(ctx, method, path, nil)
}

func (c *client) doBody(ctx context.Context, method, path string, body io.ReadCloser) (*http.Response, error) {
	u, err := url.JoinPath(c.address, path)
	if err != nil {
		return nil, fmt.Errorf("openbao %s: %w", path, err)
	}
	req, err := http.NewRequestWithContext(ctx, method, u, body)
	if err != nil {
		return nil, fmt.Errorf("openbao %s: %w", path, err)
	}
	if !c.token.IsZero() {
		req.Header.Set("X-Vault-Token", c.token.Reveal())
	}
	req.Header.Set("X-Vault-Request", "true")
	resp, err := c.http.Do(req)
	if err != nil {
		var urlErr *url.Error
		if errors.As(err, &urlErr) {
			return nil, &TransportError{Op: strings.TrimPrefix(path, "/v1/"), Err: urlErr.Err}
		}
		return nil, &TransportError{Op: strings.TrimPrefix(path, "/v1/"), Err: err}
	}
	return resp, nil
}

// statusError reads OpenBao's error list from a failed answer, at most
// 64 KiB of it.
func statusError(op string, resp *http.Response) error {
	var body struct {
		Errors []string `json:"errors"`
	}
	_ = json.NewDecoder(io.LimitReader(resp.Body, 64<<10)).Decode(&body)
	return &StatusError{Op: op, Code: resp.StatusCode, Messages: body.Errors}
}

// cancelingBody releases the request's context when the body is closed,
// and names a failed read a *TransportError (io.ErrUnexpectedEOF, a body
// cut short, stays visible to errors.Is).
type cancelingBody struct {
	io.ReadCloser
	cancel context.CancelFunc
}

func (b *cancelingBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err != nil && !errors.Is(err, io.EOF) {
		err = &TransportError{Op: SnapshotPath, Err: err}
	}
	return n, err
}

func (b *cancelingBody) Close() error {
	err := b.ReadCloser.Close()
	b.cancel()
	return err
}
