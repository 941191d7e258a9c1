package management

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
)

// apiError is an answer other than success, in RabbitMQ's shape:
// {"error": ..., "reason": ...} with an HTTP status.
type apiError struct {
	status int
	kind   string
	reason string
}

func (e *apiError) Error() string { return fmt.Sprintf("%d %s: %s", e.status, e.kind, e.reason) }

// notFound is RabbitMQ's answer for a vhost, user, queue, exchange or
// binding that does not exist.
func notFound() *apiError {
	return &apiError{status: http.StatusNotFound, kind: "Object Not Found", reason: "Not Found"}
}

func badRequest(format string, args ...any) *apiError {
	return &apiError{status: http.StatusBadRequest, kind: "bad_request", reason: fmt.Sprintf(format, args...)}
}

func notAuthorised(reason string) *apiError {
	return &apiError{status: http.StatusUnauthorized, kind: "not_authorised", reason: reason}
}

func unavailable(format string, args ...any) *apiError {
	return &apiError{status: http.StatusServiceUnavailable, kind: "service_unavailable", reason: fmt.Sprintf(format, args...)}
}

func internalError(err error) *apiError {
	return &apiError{status: http.StatusInternalServerError, kind: "internal_server_error", reason: err.Error()}
}

// writeJSON answers v with status.
func writeJSON(w http.ResponseWriter, status int, v any) {
	body, err := json.Marshal(v)
	if err != nil {
		status, body = http.StatusInternalServerError, []byte(`{"error":"internal_server_error","reason":"cannot encode the answer"}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(status)
	w.Write(body)
}

// writeError answers err: an *apiError as it says, anything else as an
// internal error.
func writeError(w http.ResponseWriter, err error) {
	var ae *apiError
	if !errors.As(err, &ae) {
		ae = internalError(err)
	}
	if ae.status == http.StatusUnauthorized {
		w.Header().Set("WWW-Authenticate", `Basic realm="RabbitMQ Management"`)
	}
	writeJSON(w, ae.status, map[string]string{"error": ae.kind, "reason": ae.reason})
}

// noContent is a change's answer with nothing to say.
func noContent(w http.ResponseWriter) { w.WriteHeader(http.StatusNoContent) }

// created is a PUT's answer: 201 when it made something new, 204 when it
// changed or confirmed what was there.
func created(w http.ResponseWriter, isNew bool) {
	if isNew {
		w.WriteHeader(http.StatusCreated)
		return
	}
	noContent(w)
}

// maxBody bounds a request body (a definitions document may be large).
const maxBody = 64 << 20

// decodeBody reads r's JSON object body into v; an empty body leaves v
// as it is (RabbitMQ takes an empty PUT as "all defaults").
func decodeBody(r *http.Request, v any) error {
	body := http.MaxBytesReader(nil, r.Body, maxBody)
	dec := json.NewDecoder(body)
	dec.UseNumber()
	if err := dec.Decode(v); err != nil {
		if errors.Is(err, io.EOF) {
			return nil
		}
		return badRequest("malformed JSON body: %v", err)
	}
	if dec.More() {
		return badRequest("malformed JSON body: more than one value")
	}
	return nil
}
