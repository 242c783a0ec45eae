// Package control is the dashboard's one part that changes anything: an
// http.Handler through which an operator who holds a token forces a
// breaker open or closed, sets it back to normal, resets it, or applies a
// rules document. Package dashboard only reads the registry; give it this
// handler (dashboard.Config.Control) and it serves it at
// dashboard.ControlPath, and its page offers the controls to whoever
// enters the token.
//
//	ctl, err := control.New(reg, control.Config{Token: os.Getenv("BULWARK_CONTROL_TOKEN")})
//	if err != nil { ... }
//	h, err := dashboard.New(reg, dashboard.Config{Control: ctl})
//
// Off unless built with a token: a dashboard without it has no control
// endpoint, and its page no controls.
package control

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"mime"
	"net/http"
	"net/url"

	"github.com/bulwark-go/bulwark/circuit"
	"github.com/bulwark-go/bulwark/command"
	"github.com/bulwark-go/bulwark/rules"
)

// TokenHeader is the request header that carries the control token. A
// header, not a cookie: a browser never adds it to a request another site
// makes, so a control request cannot be forged cross-site.
const TokenHeader = "X-Bulwark-Token"

// MinTokenLength is the shortest control token accepted.
const MinTokenLength = 16

// ErrInvalidConfig is wrapped by the errors of New and Config.Validate.
var ErrInvalidConfig = errors.New("control: invalid config")

// Config configures the control endpoint.
type Config struct {
	// Token enables the endpoint: every request must carry it in the
	// TokenHeader header. Required, at least MinTokenLength bytes; choose
	// it at random and keep it out of URLs and logs.
	Token string
	// Rules, if set, lets the endpoint apply rules documents (action
	// "apply-rules") through this manager, which keeps the baselines of
	// the groups it changes.
	Rules *rules.Manager
	// Logger receives one record per request that changes something or is
	// refused. Default slog.Default().
	Logger *slog.Logger
}

// Validate reports a missing token, or one too short to be one. The error
// wraps ErrInvalidConfig.
func (c Config) Validate() error {
	switch {
	case c.Token == "":
		return fmt.Errorf("%w: Token is empty: the control endpoint needs a token", ErrInvalidConfig)
	case len(c.Token) < MinTokenLength:
		return fmt.Errorf("%w: Token is %d bytes; at least %d are needed", ErrInvalidConfig, len(c.Token), MinTokenLength)
	}
	return nil
}

// controlRequest is the JSON body of a control request.
type controlRequest struct {
	// Action is "check" (verify the token, change nothing), "force-open",
	// "force-closed", "normal" (a breaker's mode), "reset" (restart a
	// breaker closed with an empty window) or "apply-rules".
	Action string `json:"action"`
	// Group and Command name the breaker: the group's own when Command is
	// empty.
	Group   string `json:"group"`
	Command string `json:"command"`
	// Rules is the rules document of "apply-rules".
	Rules json.RawMessage `json:"rules"`
}

// control is the control endpoint's handler.
type control struct {
	reg   *command.Registry
	token [sha256.Size]byte // the token's hash: compared in constant time, whatever the length sent
	rules *rules.Manager
	log   *slog.Logger
}

// New returns the control endpoint for the groups of reg, or an error
// wrapping ErrInvalidConfig if cfg has no token or a short one.
//
// It answers POST only (405 otherwise), with a JSON body (415 otherwise),
// and only with the token in the TokenHeader header: 401 without one, 403
// with a wrong one (compared in constant time). A request a browser marks as
// coming from another site (an Origin other than the endpoint's own, or
// Sec-Fetch-Site other than same-origin or none) is refused with 403 before
// the token is looked at. Nothing changes on any refusal. Success is 204 No
// Content; an unknown group or command is 404, a bad request 400, and a
// rules document the manager rejects 422 with the error (line and field)
// as text.
//
// Actions: "reset" restarts the breaker closed with an empty window and its
// backoff reset, in one transition with reason reset (circuit.Breaker.Reset);
// "force-open", "force-closed" and "normal" set its mode (SetMode).
func New(reg *command.Registry, cfg Config) (http.Handler, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &control{reg: reg, token: sha256.Sum256([]byte(cfg.Token)), rules: cfg.Rules, log: cfg.Logger}, nil
}

func (c *control) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", "POST")
		http.Error(w, "control: the endpoint answers POST only", http.StatusMethodNotAllowed)
		return
	}
	if !sameOrigin(r) {
		c.refuse(w, r, http.StatusForbidden, "cross-origin request")
		return
	}
	tok := r.Header.Get(TokenHeader)
	if tok == "" {
		c.refuse(w, r, http.StatusUnauthorized, "no "+TokenHeader+" header")
		return
	}
	if sum := sha256.Sum256([]byte(tok)); subtle.ConstantTimeCompare(sum[:], c.token[:]) != 1 {
		c.refuse(w, r, http.StatusForbidden, "wrong token")
		return
	}
	if mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); mt != "application/json" {
		http.Error(w, "control: the endpoint takes application/json", http.StatusUnsupportedMediaType)
		return
	}
	var req controlRequest
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<20))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		http.Error(w, "control: bad request: "+err.Error(), http.StatusBadRequest)
		return
	}
	status, err := c.do(req)
	attrs := []any{slog.String("action", req.Action), slog.String("group", req.Group),
		slog.String("command", req.Command), slog.String("remote", r.RemoteAddr), slog.Int("status", status)}
	if err != nil {
		c.log.Warn("bulwark: control action failed", append(attrs, slog.Any("error", err))...)
		http.Error(w, err.Error(), status)
		return
	}
	if req.Action != "check" {
		c.log.Info("bulwark: control action", attrs...)
	}
	w.WriteHeader(status)
}

// refuse answers a request that may not act, and logs it.
func (c *control) refuse(w http.ResponseWriter, r *http.Request, status int, why string) {
	c.log.Warn("bulwark: control request refused", slog.String("reason", why),
		slog.String("remote", r.RemoteAddr), slog.Int("status", status))
	http.Error(w, "control: refused: "+why, status)
}

// do carries out an authorised request and returns the status to answer.
func (c *control) do(req controlRequest) (int, error) {
	switch req.Action {
	case "check":
		return http.StatusNoContent, nil
	case "apply-rules":
		if c.rules == nil {
			return http.StatusNotFound, errors.New("control: rules are not enabled on this endpoint")
		}
		if err := c.rules.ApplyJSON(req.Rules); err != nil {
			return http.StatusUnprocessableEntity, err
		}
		return http.StatusNoContent, nil
	}
	modes := map[string]circuit.Mode{
		"force-open":   circuit.ForcedOpen,
		"force-closed": circuit.ForcedClosed,
		"normal":       circuit.Normal,
	}
	mode, ok := modes[req.Action]
	if !ok && req.Action != "reset" {
		return http.StatusBadRequest, fmt.Errorf("control: unknown action %q", req.Action)
	}
	g, ok := c.reg.Group(req.Group)
	if !ok {
		return http.StatusNotFound, fmt.Errorf("control: no group %q", req.Group)
	}
	b := g.Breaker()
	if req.Command != "" {
		if b, ok = g.CommandBreaker(req.Command); !ok {
			return http.StatusNotFound, fmt.Errorf("control: group %q has no command %q", req.Group, req.Command)
		}
	}
	if req.Action == "reset" {
		b.Reset()
	} else {
		b.SetMode(mode)
	}
	return http.StatusNoContent, nil
}

// sameOrigin reports whether r may come from the page itself: a browser
// sends Origin (and Sec-Fetch-Site) with a cross-site POST, and a request
// without them does not come from a browser page at all.
func sameOrigin(r *http.Request) bool {
	switch r.Header.Get("Sec-Fetch-Site") {
	case "", "same-origin", "none":
	default:
		return false
	}
	origin := r.Header.Get("Origin")
	if origin == "" {
		return true
	}
	u, err := url.Parse(origin)
	return err == nil && u.Host == r.Host
}
