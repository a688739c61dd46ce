package gcsstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"golang.org/x/oauth2"

	"github.com/openbao/operator/internal/objectstore"
)

// maxAttempts bounds the tries of one call. The executor retries whole
// runs itself and retention runs again later, so a few tries suffice and
// a store that is down is reported within seconds.
const maxAttempts = 3

// firstBackoff is the wait before the second try; it doubles after.
const firstBackoff = 250 * time.Millisecond

// objectResource holds the fields of GCS's object resource this package
// reads; the JSON API sends 64-bit integers as strings.
type objectResource struct {
	Name       string    `json:"name"`
	Size       string    `json:"size"`
	Updated    time.Time `json:"updated"`
	CRC32C     string    `json:"crc32c"`
	Generation string    `json:"generation"`
}

func (r objectResource) object() (objectstore.Object, error) {
	size, err := strconv.ParseInt(r.Size, 10, 64)
	if err != nil {
		return objectstore.Object{}, fmt.Errorf("GCS object %s: size %q: %w", r.Name, r.Size, err)
	}
	return objectstore.Object{Key: r.Name, Size: size, LastModified: r.Updated, Checksum: r.CRC32C, Version: r.Generation}, nil
}

type listResponse struct {
	Items         []objectResource `json:"items"`
	NextPageToken string           `json:"nextPageToken"`
}

// apiError is a response of GCS that is not a success.
type apiError struct {
	Code    int
	Message string
}

func (e *apiError) Error() string {
	if e.Message == "" {
		return fmt.Sprintf("GCS: HTTP %d", e.Code)
	}
	return fmt.Sprintf("GCS: HTTP %d: %s", e.Code, e.Message)
}

// isStatus says err is GCS's answer with that HTTP status.
func isStatus(err error, code int) bool {
	var apiErr *apiError
	return errors.As(err, &apiErr) && apiErr.Code == code
}

// responseError reads GCS's error document ({"error":{"message":...}})
// and closes the body. The message names the bucket or object, never a
// credential; it is cut short in case a proxy answers with a page.
func responseError(resp *http.Response) error {
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 8<<10))
	var doc struct {
		Error struct {
			Message string `json:"message"`
		} `json:"error"`
	}
	msg := ""
	if json.Unmarshal(body, &doc) == nil {
		msg = doc.Error.Message
	}
	if len(msg) > 300 {
		msg = msg[:300] + "…"
	}
	return &apiError{Code: resp.StatusCode, Message: msg}
}

// retryable says a failed call may succeed when tried again: the network
// failed, or GCS throttled or failed itself.
func retryable(err error) bool {
	var apiErr *apiError
	if errors.As(err, &apiErr) {
		return apiErr.Code == http.StatusTooManyRequests || apiErr.Code >= 500
	}
	if tokenRefused(err) {
		return false
	}
	return !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded)
}

// tokenRefused says the token endpoint refused the credentials (a key
// revoked, an account deleted): trying again cannot help.
func tokenRefused(err error) bool {
	var tokenErr *oauth2.RetrieveError
	return errors.As(err, &tokenErr) && tokenErr.Response != nil &&
		tokenErr.Response.StatusCode >= 400 && tokenErr.Response.StatusCode < 500
}

// call sends a request without a body (GET, DELETE: idempotent) and
// returns a response with a 2xx status, trying at most maxAttempts times.
func (s *store) call(ctx context.Context, method, rawURL string, header http.Header) (*http.Response, error) {
	var resp *http.Response
	err := retry(ctx, func() error {
		req, err := http.NewRequestWithContext(ctx, method, rawURL, nil)
		if err != nil {
			return fmt.Errorf("GCS request: %w", err)
		}
		for k, v := range header {
			req.Header[k] = v
		}
		resp, err = s.send(req)
		return err
	})
	return resp, err
}

// send does one request; a status other than 2xx is an *apiError.
func (s *store) send(req *http.Request) (*http.Response, error) {
	resp, err := s.client.Do(req)
	if err != nil {
		return nil, withoutQuery(err)
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return nil, responseError(resp)
	}
	return resp, nil
}

// retry runs try until it succeeds, fails for good, or has run
// maxAttempts times, waiting longer before each new try.
func retry(ctx context.Context, try func() error) error {
	wait := firstBackoff
	for attempt := 1; ; attempt++ {
		err := try()
		if err == nil || !retryable(err) || attempt == maxAttempts {
			return err
		}
		if err := sleep(ctx, wait); err != nil {
			return err
		}
		wait *= 2
	}
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

func (s *store) getJSON(ctx context.Context, rawURL string, into any) error {
	resp, err := s.call(ctx, http.MethodGet, rawURL, nil)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(into); err != nil {
		return fmt.Errorf("GCS response: %w", err)
	}
	return nil
}

// drain reads what is left of a body so the connection is reused.
func drain(resp *http.Response) error {
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	return resp.Body.Close()
}

// withoutQuery drops the query of the URL a transport error quotes: an
// upload session's URL carries its upload_id, which lets anyone holding
// it write the object.
func withoutQuery(err error) error {
	var urlErr *url.Error
	if !errors.As(err, &urlErr) {
		return err
	}
	u, perr := url.Parse(urlErr.URL)
	if perr != nil {
		return &url.Error{Op: urlErr.Op, URL: "(unparsable URL)", Err: urlErr.Err}
	}
	u.RawQuery, u.User = "", nil
	return &url.Error{Op: urlErr.Op, URL: u.String(), Err: urlErr.Err}
}
