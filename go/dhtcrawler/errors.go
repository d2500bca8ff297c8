package dhtcrawler

import "errors"

// Error is a failed call into the library: the status code of dhtcrawler.h, its stable
// name ("DHTC_ERR_INVALID_OPTION") and the library's message, which for options names the
// key's path ("metadata.timout_secs: unknown key").
//
// errors.Is(err, ErrInvalidOption) and the like compare the status only.
type Error struct {
	Status  int
	Name    string
	Message string
}

func (e *Error) Error() string {
	if e.Message == "" {
		return "dhtcrawler: " + e.Name
	}
	return "dhtcrawler: " + e.Name + ": " + e.Message
}

// Is reports whether target is an *Error with the same status.
func (e *Error) Is(target error) bool {
	var t *Error
	return errors.As(target, &t) && t.Status == e.Status
}

func sentinel(status int) *Error { return &Error{Status: status, Name: statusName(status)} }

// Sentinels for errors.Is; each matches any *Error with its status.
var (
	ErrInvalidArgument = sentinel(statusInvalidArgument)
	ErrInvalidJSON     = sentinel(statusInvalidJSON)
	ErrInvalidOption   = sentinel(statusInvalidOption)
	ErrBind            = sentinel(statusBind)
	ErrState           = sentinel(statusState)
	ErrTimeout         = sentinel(statusTimeout)
	ErrNoMemory        = sentinel(statusNoMemory)
	ErrInternal        = sentinel(statusInternal)
	ErrNotFound        = sentinel(statusNotFound)
	// ErrStore: the retry store could not be opened (an unusable SQLite file, a bad
	// PostgreSQL connection string or an unreachable server; the message says which).
	ErrStore = sentinel(statusStore)
)

// sentinels maps every status of dhtcrawler.h but DHTC_OK to its sentinel.
var sentinels = map[int]*Error{}

func init() {
	for _, e := range []*Error{ErrInvalidArgument, ErrInvalidJSON, ErrInvalidOption, ErrBind, ErrState,
		ErrTimeout, ErrNoMemory, ErrInternal, ErrNotFound, ErrStore} {
		sentinels[e.Status] = e
	}
}

// StatusError is the sentinel of a status of dhtcrawler.h (nil for DHTC_OK and for a
// status this package does not know).
func StatusError(status int) *Error { return sentinels[status] }

// ErrClosed is returned by calls on a crawler after Close.
var ErrClosed = errors.New("dhtcrawler: crawler is closed")

// stateError is the Go side's own DHTC_ERR_STATE (e.g. Close from inside a callback, Run twice).
func stateError(message string) error {
	return &Error{Status: statusState, Name: statusName(statusState), Message: message}
}
