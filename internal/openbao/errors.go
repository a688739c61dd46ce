package openbao

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
)

// Sentinels for the HTTP answers the operator branches on. A *StatusError
// matches them with errors.Is.
var (
	// ErrNotInitialized is 501: the server is not initialized.
	ErrNotInitialized = errors.New("openbao: not initialized")
	// ErrSealed is 503: the server is sealed (or otherwise unavailable).
	ErrSealed = errors.New("openbao: sealed or unavailable")
	// ErrStandby is 429, or a 307 redirect to the active server: the
	// server is an unsealed standby.
	ErrStandby = errors.New("openbao: standby")
	// ErrPermissionDenied is 403: the token is missing, invalid or lacks a policy.
	ErrPermissionDenied = errors.New("openbao: permission denied")
	// ErrInvalidRequest is 400: OpenBao refused the request's content.
	ErrInvalidRequest = errors.New("openbao: invalid request")
	// ErrNotFound is 404: nothing is stored at the path, or no mount
	// serves it.
	ErrNotFound = errors.New("openbao: not found")
	// ErrUnreadableResponse says a 2xx answer could not be decoded. It never
	// wraps the decoder's error, which may quote the body.
	ErrUnreadableResponse = errors.New("openbao: unreadable response")
)

// StatusError is an HTTP error answer of OpenBao.
type StatusError struct {
	// Op names the call, for example "sys/init".
	Op string
	// Code is the HTTP status code.
	Code int
	// Messages are OpenBao's error strings. They are dropped for calls whose
	// bodies may hold secrets (sys/init) and are then empty.
	Messages []string
}

func (e *StatusError) Error() string {
	msg := fmt.Sprintf("openbao %s: HTTP %d %s", e.Op, e.Code, http.StatusText(e.Code))
	if len(e.Messages) > 0 {
		msg += ": " + strings.Join(e.Messages, "; ")
	}
	return msg
}

// Is maps the status code to the sentinels above.
func (e *StatusError) Is(target error) bool {
	switch target {
	case ErrNotInitialized:
		return e.Code == http.StatusNotImplemented
	case ErrSealed:
		return e.Code == http.StatusServiceUnavailable
	case ErrStandby:
		return e.Code == http.StatusTooManyRequests || e.Code == http.StatusTemporaryRedirect
	case ErrPermissionDenied:
		return e.Code == http.StatusForbidden
	case ErrInvalidRequest:
		return e.Code == http.StatusBadRequest
	case ErrNotFound:
		return e.Code == http.StatusNotFound
	}
	return false
}

// TransportError says no HTTP answer came back (connection refused, TLS
// failure, timeout). It wraps the cause.
type TransportError struct {
	Op  string
	Err error
}

func (e *TransportError) Error() string { return fmt.Sprintf("openbao %s: %v", e.Op, e.Err) }
func (e *TransportError) Unwrap() error { return e.Err }
