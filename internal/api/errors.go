package api

import (
	"errors"
	"fmt"
	"net/http"
)

// Error is an API error: an HTTP status, a machine-readable code, the
// request field at fault (when one is) and a message for people that names
// it. It is the body of every 4xx and 5xx answer: {"error": {...}}.
type Error struct {
	Status  int    `json:"status"`
	Code    string `json:"code"`
	Field   string `json:"field,omitempty"`
	Message string `json:"message"`
	// RetryAfter (a 429) is how many seconds to wait before trying again;
	// it is also the Retry-After header.
	RetryAfter int `json:"retry_after_s,omitempty"`
}

func (e *Error) Error() string {
	return e.Message
}

// Codes.
const (
	CodeInvalid         = "invalid"
	CodeUnauthenticated = "unauthenticated"
	CodeForbidden       = "forbidden"
	CodeNotFound        = "not_found"
	CodeConflict        = "conflict"
	CodeTooLarge        = "too_large"
	CodeUnavailable     = "unavailable"
	CodeInternal        = "internal"
	CodeStaleSession    = "stale_session"
	// CodeQuota: a per-user quota is used up (429).
	CodeQuota = "quota_exceeded"
	// CodeRateLimited: too many requests with one token (429, Retry-After).
	CodeRateLimited = "rate_limited"
)

// Invalid is a 400 naming the bad field; the message starts with it.
func Invalid(field, format string, args ...any) *Error {
	msg := fmt.Sprintf(format, args...)
	if field != "" {
		msg = field + ": " + msg
	}
	return &Error{Status: http.StatusBadRequest, Code: CodeInvalid, Field: field, Message: msg}
}

// Forbidden is a 403.
func Forbidden(format string, args ...any) *Error {
	return &Error{Status: http.StatusForbidden, Code: CodeForbidden, Message: fmt.Sprintf(format, args...)}
}

// NotFound is a 404.
func NotFound(format string, args ...any) *Error {
	return &Error{Status: http.StatusNotFound, Code: CodeNotFound, Message: fmt.Sprintf(format, args...)}
}

// Conflict is a 409.
func Conflict(format string, args ...any) *Error {
	return &Error{Status: http.StatusConflict, Code: CodeConflict, Message: fmt.Sprintf(format, args...)}
}

// StaleSession is the 409 an agent gets for a poll or report of an old
// registration: it must register again.
func StaleSession(format string, args ...any) *Error {
	return &Error{Status: http.StatusConflict, Code: CodeStaleSession, Message: fmt.Sprintf(format, args...)}
}

// Unavailable is a 503 (the server is shutting down, or its store failed).
func Unavailable(format string, args ...any) *Error {
	return &Error{Status: http.StatusServiceUnavailable, Code: CodeUnavailable, Message: fmt.Sprintf(format, args...)}
}

// AsError turns any error into an *Error: itself if it is one (or wraps
// one), a 500 otherwise.
func AsError(err error) *Error {
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	return &Error{Status: http.StatusInternalServerError, Code: CodeInternal, Message: err.Error()}
}

// IsStatus reports whether err is an API error with the given HTTP status.
func IsStatus(err error, status int) bool {
	var e *Error
	return errors.As(err, &e) && e.Status == status
}
