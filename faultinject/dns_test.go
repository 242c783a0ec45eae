package faultinject

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// fakeNameServer answers every DNS query with an empty answer and rcode
// (3 NXDOMAIN, 2 SERVFAIL) on a loopback UDP port, and returns a dialer
// whose resolver asks it, closed with the test.
func fakeNameServer(t *testing.T, rcode byte) *net.Dialer {
	t.Helper()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	require.NoError(t, err)
	done := make(chan struct{})
	t.Cleanup(func() {
		_ = pc.Close()
		<-done
	})
	go func() {
		defer close(done)
		buf := make([]byte, 1500)
		for {
			n, addr, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			if resp, ok := dnsAnswer(buf[:n], rcode); ok {
				_, _ = pc.WriteTo(resp, addr)
			}
		}
	}()
	server := pc.LocalAddr().String()
	return &net.Dialer{Resolver: &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return new(net.Dialer).DialContext(ctx, "udp", server)
	}}}
}

// dnsAnswer is the answer to query with rcode and no records: its header
// (the query's ID, QR and RA set, RD copied) and its question.
func dnsAnswer(query []byte, rcode byte) ([]byte, bool) {
	i := 12 // the header; the question's name follows, then its type and class
	for i < len(query) && query[i] != 0 {
		i += int(query[i]) + 1
	}
	if i += 5; i > len(query) {
		return nil, false
	}
	resp := append([]byte(nil), query[:i]...)
	resp[2] = 0x80 | query[2]&0x01
	resp[3] = 0x80 | rcode
	clear(resp[6:12]) // no answer, authority or additional records
	return resp, true
}

// TestTransportDNSFailureLooksLikeARealOne compares what a client gets from
// an injected DNS failure with what it gets from a real one (a resolver
// asking a name server that answers NXDOMAIN or SERVFAIL): the same types
// in the chain, the same fields, Timeout and Temporary, and the same text
// but for the name server the real resolver names.
func TestTransportDNSFailureLooksLikeARealOne(t *testing.T) {
	const target = "http://inventory.drill.test:8080/stock"
	for _, tc := range []struct {
		name  string
		kind  DNSFailure
		rcode byte
	}{{"zero", "", 3}, {"not_found", DNSNotFound, 3}, {"server_failure", DNSServerFailure, 2}} {
		t.Run(tc.name, func(t *testing.T) {
			real := &http.Transport{DialContext: fakeNameServer(t, tc.rcode).DialContext}
			t.Cleanup(real.CloseIdleConnections)
			_, realErr := (&http.Client{Transport: real}).Get(target)
			require.Error(t, realErr)
			injected := NewTransport(real, newEnabled(t, Config{DNSShare: 1, DNS: tc.kind}))
			_, err := (&http.Client{Transport: injected}).Get(target)
			require.Error(t, err)

			var realDNS, dns *net.DNSError
			require.ErrorAs(t, realErr, &realDNS)
			require.ErrorAs(t, err, &dns)
			assert.Equal(t, realDNS.Err, dns.Err)
			assert.Equal(t, "inventory.drill.test", dns.Name)
			assert.Equal(t, realDNS.Name, dns.Name)
			assert.Equal(t, realDNS.IsNotFound, dns.IsNotFound)
			assert.Equal(t, realDNS.IsTemporary, dns.IsTemporary)
			assert.Equal(t, realDNS.IsTimeout, dns.IsTimeout)
			assert.Empty(t, dns.Server)

			var realOp, op *net.OpError
			require.ErrorAs(t, realErr, &realOp)
			require.ErrorAs(t, err, &op)
			assert.Equal(t, *realOp.Err.(*net.DNSError), *realDNS, "the OpError wraps the DNSError directly")
			assert.Same(t, dns, op.Err)
			assert.Equal(t, realOp.Op, op.Op)
			assert.Equal(t, realOp.Net, op.Net)
			assert.Equal(t, realOp.Source, op.Source)
			assert.Equal(t, realOp.Addr, op.Addr)

			var realURL, u *url.Error
			require.ErrorAs(t, realErr, &realURL)
			require.ErrorAs(t, err, &u)
			assert.Same(t, op, u.Err, "RoundTrip returns the OpError itself, as net/http's Transport does")
			assert.Equal(t, realURL.Timeout(), u.Timeout())
			assert.Equal(t, realURL.Temporary(), u.Temporary())
			assert.Equal(t, strings.Replace(realErr.Error(), " on "+realDNS.Server, "", 1), err.Error())

			assert.ErrorIs(t, err, ErrInjected)
			assert.NotErrorIs(t, realErr, ErrInjected)
			var fe *Error
			require.ErrorAs(t, err, &fe)
			assert.Equal(t, FaultDNS, fe.Fault)
			assert.NotErrorIs(t, err, context.DeadlineExceeded)
			assert.NotErrorIs(t, err, context.Canceled)
		})
	}
}

func TestDNSFailureNamesTheRequestsHost(t *testing.T) {
	err := dnsError("db.example", DNSNotFound)
	assert.Equal(t, "dial tcp: lookup db.example: no such host", err.Error())
	err = dnsError("db.example", DNSServerFailure)
	assert.Equal(t, "dial tcp: lookup db.example: server misbehaving", err.Error())
	var ne net.Error
	require.True(t, errors.As(err, &ne))
	assert.False(t, ne.Timeout())
}
