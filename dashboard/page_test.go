package dashboard

import (
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestPageServesEmbeddedAssets(t *testing.T) {
	p, err := NewPage(PageConfig{})
	require.NoError(t, err)
	for _, tc := range []struct {
		path, ctype, contains string
	}{
		{"/", "text/html; charset=utf-8", `<meta name="bulwark-stream" content="hystrix.stream">`},
		{"/index.html", "text/html; charset=utf-8", `<script src="app.js"`},
		{"/ops/", "text/html; charset=utf-8", `<link rel="stylesheet" href="style.css">`},
		{"/app.js", "text/javascript; charset=utf-8", "await fetch(url"},
		{"/ops/app.js", "text/javascript; charset=utf-8", "textContent"},
		{"/style.css", "text/css; charset=utf-8", ".tile"},
	} {
		rec := httptest.NewRecorder()
		p.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, tc.path, nil))
		require.Equal(t, http.StatusOK, rec.Code, tc.path)
		assert.Equal(t, tc.ctype, rec.Header().Get("Content-Type"), tc.path)
		assert.Contains(t, rec.Body.String(), tc.contains, tc.path)
		assert.Equal(t, "nosniff", rec.Header().Get("X-Content-Type-Options"), tc.path)
		assert.Contains(t, rec.Header().Get("Content-Security-Policy"), "script-src 'self'", tc.path)
		assert.NotEmpty(t, rec.Header().Get("ETag"), tc.path)
	}
}

// remoteRef matches a reference that would load something from another
// host: a src or href to an absolute or protocol-relative URL, a CSS url()
// or @import of one, or a script fetching one.
var remoteRef = regexp.MustCompile(`(?i)((src|href)\s*=\s*["']?|url\(\s*["']?|@import\s+["']?|fetch\(\s*["'])(https?:)?//`)

func TestPageIsSelfContained(t *testing.T) {
	p, err := NewPage(PageConfig{})
	require.NoError(t, err)
	for _, path := range []string{"/", "/app.js", "/style.css"} {
		rec := httptest.NewRecorder()
		p.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
		body := rec.Body.String()
		assert.Empty(t, remoteRef.FindAllString(body, -1), "%s loads nothing from the network", path)
		for _, sink := range []string{"innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval("} {
			assert.False(t, strings.Contains(body, sink), "%s uses %s: build the DOM with textContent", path, sink)
		}
	}
}

func TestPageRevalidatesWithETag(t *testing.T) {
	p, err := NewPage(PageConfig{})
	require.NoError(t, err)
	rec := httptest.NewRecorder()
	p.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/app.js", nil))
	etag := rec.Header().Get("ETag")
	req := httptest.NewRequest(http.MethodGet, "/app.js", nil)
	req.Header.Set("If-None-Match", etag)
	rec = httptest.NewRecorder()
	p.ServeHTTP(rec, req)
	assert.Equal(t, http.StatusNotModified, rec.Code)
}

func TestPageStreamURLIsEscaped(t *testing.T) {
	p, err := NewPage(PageConfig{StreamURL: `/s?a=1&b="><script>`})
	require.NoError(t, err)
	rec := httptest.NewRecorder()
	p.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/", nil))
	assert.NotContains(t, rec.Body.String(), `"><script>`)
	assert.Contains(t, rec.Body.String(), `content="/s?a=1&amp;b=&#34;&gt;&lt;script&gt;"`)
}

func TestPageRejectsOtherPathsAndMethods(t *testing.T) {
	p, err := NewPage(PageConfig{})
	require.NoError(t, err)
	rec := httptest.NewRecorder()
	p.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/secret.txt", nil))
	assert.Equal(t, http.StatusNotFound, rec.Code)
	rec = httptest.NewRecorder()
	p.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/", nil))
	assert.Equal(t, http.StatusMethodNotAllowed, rec.Code)

	_, err = NewPage(PageConfig{StreamURL: "http://[::1"})
	require.ErrorIs(t, err, ErrInvalidConfig)
}

func TestNewServesPageAndStream(t *testing.T) {
	h, err := New(&fakeSource{snap: sampleSnapshot()}, Config{})
	require.NoError(t, err)
	mux := http.NewServeMux()
	mux.Handle("/", h)
	mux.Handle("/ops/", http.StripPrefix("/ops", h))
	ts := httptest.NewServer(mux)
	defer ts.Close()
	client := newTestClient()

	for _, base := range []string{ts.URL, ts.URL + "/ops"} {
		resp, err := client.Get(base + "/")
		require.NoError(t, err)
		body := readBody(t, resp)
		resp.Body.Close()
		assert.Equal(t, http.StatusOK, resp.StatusCode)
		assert.Contains(t, body, "bulwark dashboard")

		c := openStream(t, client, base+"/hystrix.stream")
		f, err := c.sse.frame()
		require.NoError(t, err)
		assert.NotNil(t, f.find(TypeHystrixCommand, "GetUser", "users"))
		c.Close()
	}
	waitClients(t, h.Stream(), 0)

	_, err = New(&fakeSource{}, Config{MaxClients: -1})
	require.ErrorIs(t, err, ErrInvalidConfig)
}
