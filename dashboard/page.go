package dashboard

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"fmt"
	"html/template"
	"net/http"
	"net/url"
	"strings"
	"time"
)

//go:embed web
var web embed.FS

// DefaultStreamURL is where the page looks for the stream when PageConfig
// gives none: relative to the page, so a page at /ops/ reads
// /ops/hystrix.stream.
const DefaultStreamURL = "hystrix.stream"

// PageConfig configures the dashboard page.
type PageConfig struct {
	// StreamURL is the stream the page reads, absolute or relative to the
	// page. Default DefaultStreamURL. A visitor can point the page at
	// another stream with ?stream=<url>, and ask for a delay with
	// ?delay=<ms>.
	StreamURL string
	// ControlURL is the control endpoint (see package dashboard/control), absolute or
	// relative to the page. Empty: the page offers no controls. With it,
	// the page asks for the token and, once the endpoint accepts it, shows
	// force open / force closed / normal / reset buttons on each breaker.
	ControlURL string
}

// asset is one embedded file, ready to serve.
type asset struct {
	body  []byte
	ctype string
	etag  string
}

func newAsset(body []byte, ctype string) asset {
	sum := sha256.Sum256(body)
	return asset{body: body, ctype: ctype, etag: `"` + hex.EncodeToString(sum[:8]) + `"`}
}

// pageHandler serves the dashboard: index.html, app.js and style.css.
type pageHandler struct {
	index, js, css asset
}

// NewPage returns the handler of the dashboard page, a static page embedded
// in the binary (it needs no network access besides the stream). It serves
// the page for any path ending in "/" or "/index.html", and its script and
// style sheet at "app.js" and "style.css" beside it: mount it at a path
// ending in "/", for example
//
//	mux.Handle("/ops/", http.StripPrefix("/ops", page))
//
// It fails, wrapping ErrInvalidConfig, if cfg.StreamURL is not a URL.
func NewPage(cfg PageConfig) (http.Handler, error) {
	if cfg.StreamURL == "" {
		cfg.StreamURL = DefaultStreamURL
	}
	if _, err := url.Parse(cfg.StreamURL); err != nil {
		return nil, fmt.Errorf("%w: StreamURL %q: %v", ErrInvalidConfig, cfg.StreamURL, err)
	}
	tpl, err := template.ParseFS(web, "web/index.html")
	if err != nil {
		return nil, fmt.Errorf("dashboard: embedded page: %w", err)
	}
	var index bytes.Buffer
	if err := tpl.Execute(&index, cfg); err != nil {
		return nil, fmt.Errorf("dashboard: embedded page: %w", err)
	}
	js, err := web.ReadFile("web/app.js")
	if err != nil {
		return nil, fmt.Errorf("dashboard: embedded page: %w", err)
	}
	css, err := web.ReadFile("web/style.css")
	if err != nil {
		return nil, fmt.Errorf("dashboard: embedded page: %w", err)
	}
	return &pageHandler{
		index: newAsset(index.Bytes(), "text/html; charset=utf-8"),
		js:    newAsset(js, "text/javascript; charset=utf-8"),
		css:   newAsset(css, "text/css; charset=utf-8"),
	}, nil
}

// contentSecurityPolicy lets the page run only its own script and style, and
// connect to any stream the visitor names.
const contentSecurityPolicy = "default-src 'none'; script-src 'self'; style-src 'self'; " +
	"img-src 'self' data:; connect-src *; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

func (p *pageHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "dashboard: the page answers GET and HEAD only", http.StatusMethodNotAllowed)
		return
	}
	var a *asset
	switch path := r.URL.Path; {
	case path == "" || strings.HasSuffix(path, "/") || strings.HasSuffix(path, "/index.html"):
		a = &p.index
	case strings.HasSuffix(path, "/app.js"):
		a = &p.js
	case strings.HasSuffix(path, "/style.css"):
		a = &p.css
	default:
		http.NotFound(w, r)
		return
	}
	h := w.Header()
	h.Set("Content-Type", a.ctype)
	h.Set("ETag", a.etag)
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Content-Security-Policy", contentSecurityPolicy)
	http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(a.body))
}
