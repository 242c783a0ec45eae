package httpguard

import (
	"fmt"
	"net"
	"net/url"
	"strings"
)

// GroupName returns the name of the group that serves requests to u: one
// name per backend, however u spells it. The host is lower-cased and loses
// a trailing dot; the port is u's, or the scheme's default (80 for http,
// 443 for https). Examples: "api.example.com:443" for https://API.Example.com./x,
// "[::1]:8080" for http://[::1]:8080/. A URL of another scheme without a
// port is named by its host alone. The error tells of a URL without a host.
//
// Create a group of that name in the registry before the first request to
// give a host its own settings.
func GroupName(u *url.URL) (string, error) {
	host := strings.TrimSuffix(strings.ToLower(u.Hostname()), ".")
	if host == "" {
		return "", fmt.Errorf("httpguard: URL %q has no host", u.Redacted())
	}
	port := u.Port()
	if port == "" {
		switch strings.ToLower(u.Scheme) {
		case "http":
			port = "80"
		case "https":
			port = "443"
		default:
			return host, nil
		}
	}
	return net.JoinHostPort(host, port), nil
}
