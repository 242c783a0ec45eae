package durable

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"slices"
	"strings"
	"time"
)

// MinSecretLen is the shortest StatusConfig.Secret accepted, in bytes.
const MinSecretLen = 16

// DefaultRetryAfter is StatusConfig.RetryAfter's default.
const DefaultRetryAfter = time.Second

// The answers of a StatusHandler that are no State of a write.
const (
	// StateUnknown (404 Not Found): the token was not issued here (it is
	// malformed, altered, or signed with another secret). Nothing is
	// looked up for it.
	StateUnknown State = "unknown"
	// StateExpired (410 Gone): the token was issued here, but the queue
	// keeps no record of its write any more: its outcome record expired
	// or was pushed out (see Retention), the queue lost its state (Redis
	// restarted empty: Stats.Resets), or its ID now names another write
	// (a new Store file). The write's outcome is not known here; it is
	// never reported applied.
	StateExpired State = "expired"
)

// StatusConfig configures a StatusHandler.
type StatusConfig struct {
	// Queue is the queue whose writes the handler reports. Required.
	Queue Queue
	// Secret signs the tokens (HMAC-SHA256), at least MinSecretLen
	// bytes, random, the same in every process that serves the queue's
	// tokens, and one per queue: a token verifies at every handler with
	// the same secret. Required.
	Secret []byte
	// PreviousSecrets are secrets that signed tokens before Secret: their
	// tokens still verify (Token signs with Secret only), so a secret can
	// be rotated without breaking the tokens of writes in flight.
	PreviousSecrets [][]byte
	// RetryAfter is the least Retry-After of an answer "accepted" and the
	// Retry-After of a 503 (default 1 s); an accepted write in backoff
	// gets the time until it is due, if longer.
	RetryAfter time.Duration
	// Logger receives a record per queue error met while answering
	// (default slog.Default()).
	Logger *slog.Logger
}

// StatusHandler serves the state of deferred writes over HTTP, to clients
// that poll after a 202 Accepted. Token turns a deferred write's Receipt
// into the token that the 202's Location names; a GET (or HEAD)
// whose path ends with the token answers what the queue knows of the
// write, as JSON (StatusResponse). It mounts in any mux; the token is the
// last segment of the request's path:
//
//	mux.Handle("GET /orders/status/{token}", status)
//	w.Header().Set("Location", "/orders/status/"+status.Token(receipt))
//
// # Answers
//
//	200 {"state":"accepted", "accepted_at", "age_ms", "attempts", "deliveries", "next_replay_at"}
//	    Retry-After: seconds until the write is due (at least RetryAfter); Cache-Control: no-store
//	200 {"state":"applied", "accepted_at", "age_ms", "attempts", "deliveries", "applied_at"}
//	    Cache-Control: private, max-age=3600 (final)
//	200 {"state":"dead_lettered", "accepted_at", "age_ms", "attempts", "deliveries", "reason"}
//	    Cache-Control: no-store (an operator may requeue it)
//	404 {"state":"unknown"}       the token was not issued here; Cache-Control: no-store
//	410 {"state":"expired"}       issued here, no record kept any more; Cache-Control: no-store
//	405 {"error":...}             not GET or HEAD; Allow: GET, HEAD
//	500 {"error":...}             the write's record is damaged (ErrCorrupt); logged
//	503 {"error":...}             the queue failed (Redis down); Retry-After; logged
//
// Every state of a write is a 200: the status resource exists, and its
// body says where the write is. Times are RFC 3339 in UTC; age_ms is the
// time since the write was accepted; a field that is zero or empty is
// left out (attempts 0, next_replay_at for a write due now).
// Content-Type is application/json; a HEAD gets the same status and
// headers without the body.
//
// # Tokens
//
// A token holds the entry ID, an HMAC-SHA256 of the write's idempotency
// key (64 bits) and an HMAC-SHA256 of both (128 bits), in unpadded
// base64url: it cannot be forged or derived from another, so a client
// learns the state of the writes whose tokens it was given and of no
// other. A token that does not verify is answered 404 without a lookup,
// whatever its ID; one that verifies but whose ID names no record, or a
// write with another key (a Store file created anew numbers its entries
// from 1 again), is answered 410. The answer holds no key, payload,
// group, command or error text (Entry.LastError is for operators: see
// Queue.DeadLetters). The ID inside a token is not hidden: the Store's
// IDs are sequence numbers, so a client can tell how many writes its
// queue had deferred before its own.
//
// A StatusHandler is safe for concurrent use.
type StatusHandler struct {
	cfg     StatusConfig
	secrets [][]byte // Secret, then PreviousSecrets
}

// NewStatusHandler returns a StatusHandler, or an error wrapping
// ErrInvalidConfig that names the bad field (a secret's length, never its
// bytes).
func NewStatusHandler(cfg StatusConfig) (*StatusHandler, error) {
	bad := func(format string, a ...any) error {
		return fmt.Errorf("%w: "+format, append([]any{ErrInvalidConfig}, a...)...)
	}
	switch {
	case cfg.Queue == nil:
		return nil, bad("StatusConfig.Queue is nil")
	case len(cfg.Secret) < MinSecretLen:
		return nil, bad("StatusConfig.Secret of %d bytes, need at least %d", len(cfg.Secret), MinSecretLen)
	case cfg.RetryAfter < 0:
		return nil, bad("StatusConfig.RetryAfter %v must not be negative", cfg.RetryAfter)
	}
	h := &StatusHandler{cfg: cfg, secrets: [][]byte{bytes.Clone(cfg.Secret)}}
	for i, s := range cfg.PreviousSecrets {
		if len(s) < MinSecretLen {
			return nil, bad("StatusConfig.PreviousSecrets[%d] of %d bytes, need at least %d", i, len(s), MinSecretLen)
		}
		h.secrets = append(h.secrets, bytes.Clone(s))
	}
	if h.cfg.RetryAfter == 0 {
		h.cfg.RetryAfter = DefaultRetryAfter
	}
	if h.cfg.Logger == nil {
		h.cfg.Logger = slog.Default()
	}
	return h, nil
}

// A token is a tag (tagLen bytes), a key tag (keyTagLen bytes) and the
// entry ID, in unpadded base64url: the tag is an HMAC of the key tag and
// the ID, checked before any lookup; the key tag, an HMAC of the write's
// idempotency key, is checked against the entry found, so that a token
// never answers for another write that got the same ID (a Store file
// created anew numbers its entries from 1 again).
const (
	tagLen    = 16
	keyTagLen = 8
	// maxTokenLen bounds the tokens verified, in characters: past it, a
	// token is unknown without decoding it.
	maxTokenLen = 256
)

// hmacOf returns the HMAC-SHA256 under secret of the parts, each ended by
// a zero byte, cut to n bytes.
func hmacOf(secret []byte, n int, parts ...string) []byte {
	m := hmac.New(sha256.New, secret)
	for _, p := range parts {
		m.Write([]byte(p))
		m.Write([]byte{0})
	}
	return m.Sum(nil)[:n]
}

// keyTag returns the key tag of idempotency key key under secret.
func keyTag(secret []byte, key string) []byte {
	return hmacOf(secret, keyTagLen, "bulwark durable status key", key)
}

// tag returns the tag of a token for entry id, of key tag kt.
func tag(secret, kt []byte, id string) []byte {
	return hmacOf(secret, tagLen, "bulwark durable status token", string(kt), id)
}

// Token returns the token of the deferred write r (the Receipt of a
// Write whose call was deferred), signed with Secret: URL-safe, the same
// for the same write. A Receipt without EntryID (a write applied at once)
// has no token: Token returns "".
func (h *StatusHandler) Token(r Receipt) string {
	if r.EntryID == "" {
		return ""
	}
	kt := keyTag(h.secrets[0], r.Key)
	raw := slices.Concat(tag(h.secrets[0], kt, r.EntryID), kt, []byte(r.EntryID))
	return base64.RawURLEncoding.EncodeToString(raw)
}

// verify returns the entry ID and key tag of token and the secret that
// signed it, or ok false if none of the secrets did.
func (h *StatusHandler) verify(token string) (id string, kt, secret []byte, ok bool) {
	if len(token) > maxTokenLen {
		return "", nil, nil, false
	}
	raw, err := base64.RawURLEncoding.Strict().DecodeString(token)
	if err != nil || len(raw) <= tagLen+keyTagLen {
		return "", nil, nil, false
	}
	kt, id = raw[tagLen:tagLen+keyTagLen], string(raw[tagLen+keyTagLen:])
	for _, s := range h.secrets {
		if hmac.Equal(raw[:tagLen], tag(s, kt, id)) {
			return id, kt, s, true
		}
	}
	return "", nil, nil, false
}

// StatusResponse is the JSON body of every StatusHandler answer (see
// StatusHandler for which fields each answer has).
type StatusResponse struct {
	// State is accepted, applied, dead_lettered, unknown or expired;
	// empty in an error answer.
	State State `json:"state,omitempty"`
	// AcceptedAt is when the write was accepted (Entry.EnqueuedAt).
	AcceptedAt time.Time `json:"accepted_at,omitzero"`
	// AgeMs is the time since AcceptedAt, in milliseconds, at the answer.
	AgeMs int64 `json:"age_ms,omitzero"`
	// Attempts counts the replays the dependency refused (Entry.Attempts).
	Attempts int `json:"attempts,omitzero"`
	// Deliveries counts the times the write may have reached the
	// dependency (Entry.Deliveries).
	Deliveries int `json:"deliveries,omitzero"`
	// NextReplayAt is the earliest time of the next replay of an accepted
	// write in backoff; omitted when the write is due now.
	NextReplayAt time.Time `json:"next_replay_at,omitzero"`
	// AppliedAt is when the write was recorded applied.
	AppliedAt time.Time `json:"applied_at,omitzero"`
	// Reason says why a dead letter was dead-lettered (ReasonBadRequest,
	// ReasonAttempts, ReasonMaxAge, ReasonCorrupt).
	Reason string `json:"reason,omitempty"`
	// Error says why no state is answered (405, 500, 503).
	Error string `json:"error,omitempty"`
}

// Cache-Control of the answers: a final one may be kept a while by the
// client; every other must be asked again.
const (
	cacheFinal   = "private, max-age=3600"
	cacheNoStore = "no-store"
)

// ServeHTTP answers the state of the write whose token ends the request's
// path (see StatusHandler).
func (h *StatusHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		answer(w, http.StatusMethodNotAllowed, cacheNoStore, StatusResponse{Error: "method not allowed: use GET or HEAD"})
		return
	}
	id, kt, secret, ok := h.verify(r.URL.Path[strings.LastIndexByte(r.URL.Path, '/')+1:])
	if !ok {
		answer(w, http.StatusNotFound, cacheNoStore, StatusResponse{State: StateUnknown})
		return
	}
	st, err := h.cfg.Queue.Status(r.Context(), id)
	switch {
	case errors.Is(err, ErrNotFound), err == nil && !hmac.Equal(kt, keyTag(secret, st.Entry.Key)):
		answer(w, http.StatusGone, cacheNoStore, StatusResponse{State: StateExpired})
		return
	case err != nil:
		h.failed(r.Context(), w, id, err)
		return
	}
	now := time.Now()
	e := st.Entry
	resp := StatusResponse{State: st.State, Attempts: e.Attempts, Deliveries: e.Deliveries}
	if !e.EnqueuedAt.IsZero() {
		resp.AcceptedAt, resp.AgeMs = e.EnqueuedAt.UTC(), now.Sub(e.EnqueuedAt).Milliseconds()
	}
	cache := cacheNoStore
	switch st.State {
	case StateAccepted:
		wait := h.cfg.RetryAfter
		if e.NotBefore.After(now) {
			resp.NextReplayAt = e.NotBefore.UTC()
			wait = max(wait, e.NotBefore.Sub(now))
		}
		w.Header().Set("Retry-After", retryAfter(wait))
	case StateApplied:
		resp.AppliedAt, cache = st.AppliedAt.UTC(), cacheFinal
	case StateDeadLettered:
		resp.Reason = e.Reason
	}
	answer(w, http.StatusOK, cache, resp)
}

// failed answers a queue error: 500 for a damaged record, else 503 with
// Retry-After; it logs the error unless the client has gone.
func (h *StatusHandler) failed(ctx context.Context, w http.ResponseWriter, id string, err error) {
	if ctx.Err() == nil {
		h.cfg.Logger.Error("bulwark: durable status lookup failed", slog.String("id", id), slog.Any("err", err))
	}
	if errors.Is(err, ErrCorrupt) {
		answer(w, http.StatusInternalServerError, cacheNoStore, StatusResponse{Error: "the record of this write is damaged"})
		return
	}
	w.Header().Set("Retry-After", retryAfter(h.cfg.RetryAfter))
	answer(w, http.StatusServiceUnavailable, cacheNoStore, StatusResponse{Error: "status unavailable, retry later"})
}

// retryAfter returns d as a Retry-After value: whole seconds, rounded up,
// at least 1.
func retryAfter(d time.Duration) string {
	return fmt.Sprint(max(1, int64(math.Ceil(d.Seconds()))))
}

// answer writes resp as JSON with status code and Cache-Control cache.
func answer(w http.ResponseWriter, code int, cache string, resp StatusResponse) {
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Cache-Control", cache)
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(resp)
}
