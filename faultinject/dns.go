package faultinject

import (
	"fmt"
	"net"
)

// DNSFailure is a kind of failed name lookup, injected by
// Config.DNSShare. Each kind gives the *net.DNSError that Go's resolver
// returns for it.
type DNSFailure string

// The lookup failures DNSShare injects.
const (
	// DNSNotFound is a name that does not exist (NXDOMAIN): "no such
	// host", IsNotFound set. The zero DNSFailure means it too.
	DNSNotFound DNSFailure = "not_found"
	// DNSServerFailure is a name server that failed to answer (SERVFAIL):
	// "server misbehaving", IsTemporary set.
	DNSServerFailure DNSFailure = "server_failure"
)

func (k DNSFailure) validate() error {
	switch k {
	case "", DNSNotFound, DNSServerFailure:
		return nil
	}
	return fmt.Errorf("DNS is %q, want %q or %q (or empty)", string(k), DNSNotFound, DNSServerFailure)
}

// dnsError is the error net/http's Transport returns when the lookup of
// host fails with kind: the dialer's *net.OpError around the resolver's
// *net.DNSError. Server is left empty, as the resolvers that use no name
// server of their own (cgo, the hosts file) leave it; the DNSError wraps
// an *Error of FaultDNS where a real one wraps nothing, so that the chain
// matches ErrInjected without changing its text, Timeout or Temporary.
func dnsError(host string, kind DNSFailure) error {
	e := &net.DNSError{Err: "no such host", Name: host, IsNotFound: true, UnwrapErr: &Error{Fault: FaultDNS}}
	if kind == DNSServerFailure {
		e.Err, e.IsNotFound, e.IsTemporary = "server misbehaving", false, true
	}
	return &net.OpError{Op: "dial", Net: "tcp", Err: e}
}
