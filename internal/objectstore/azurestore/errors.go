package azurestore

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"

	"github.com/openbao/operator/internal/objectstore"
)

// fail classifies an error of the SDK. A response error is reduced to its
// code and status, and any other error has the SAS token cut out: both
// may quote the request's URL, whose query holds the token.
func (s *store) fail(op, key string, err error) error {
	permanent := false
	var resp *azcore.ResponseError
	if errors.As(err, &resp) {
		switch resp.StatusCode {
		case http.StatusBadRequest, http.StatusUnauthorized, http.StatusForbidden, http.StatusNotFound,
			http.StatusRequestEntityTooLarge:
			permanent = true
		}
		err = &responseError{code: resp.ErrorCode, status: resp.StatusCode, cause: err}
	} else if s.sasToken != "" {
		err = &redactedError{text: redactSAS(err, s.sasToken), cause: err}
	}
	return &objectstore.Error{Op: op, Key: key, Permanent: permanent, Err: err}
}

// redactSAS prints err without the SAS token. The client reorders the
// token's parameters in the request's URL, so the URL of a *url.Error
// loses its whole query, and every value of the token is cut out of what
// remains.
func redactSAS(err error, token string) string {
	text := err.Error()
	var uerr *url.Error
	if errors.As(err, &uerr) {
		if u, perr := url.Parse(uerr.URL); perr == nil && u.RawQuery != "" {
			u.RawQuery = "[redacted]"
			text = strings.ReplaceAll(text, uerr.URL, u.String())
		}
	}
	text = strings.ReplaceAll(text, token, "[redacted]")
	if params, perr := url.ParseQuery(strings.TrimPrefix(token, "?")); perr == nil {
		for _, values := range params {
			for _, v := range values {
				if len(v) >= 8 { // a short value could cut unrelated words; the signature is long
					text = strings.ReplaceAll(strings.ReplaceAll(text, url.QueryEscape(v), "[redacted]"), v, "[redacted]")
				}
			}
		}
	}
	return text
}

// responseError prints the service's code and status only.
type responseError struct {
	code   string
	status int
	cause  error
}

func (e *responseError) Error() string {
	return fmt.Sprintf("HTTP %d %s", e.status, e.code)
}

func (e *responseError) Unwrap() error { return e.cause }

// redactedError prints its cause's text without the SAS token, and still
// unwraps to it, so that context.Canceled and the like are recognized.
type redactedError struct {
	text  string
	cause error
}

func (e *redactedError) Error() string { return e.text }
func (e *redactedError) Unwrap() error { return e.cause }
