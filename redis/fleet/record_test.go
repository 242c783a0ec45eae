package fleet

import (
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestParseWindowRejectsBadData(t *testing.T) {
	const now = 1_000_000
	age, skew := 10*time.Second, time.Second
	good := window{Epoch: 4, At: now, Success: 7, Failure: 3, Timeout: 1, Slow: 2}
	w, err := parseWindow(good.String(), now, age, skew)
	require.NoError(t, err)
	require.Equal(t, good, w)
	for _, bad := range []string{
		"", "garbage", "v1 1000000 0 1 1 1 0", "v2 0 1000000 1 1 1", "v2 0 1000000 1 1 1 0 9",
		"v2 0 1000000 -1 1 1 0", "v2 0 1000000 x 1 1 0", "v2 0 1000000 1 1 1 5", // slow > success
		"v2 -1 1000000 1 1 1 0",                // negative epoch
		"v2 999999999999999 1000000 1 1 1 0",   // absurd epoch
		"v2 0 1000000 1 99999999999999999 1 0", // absurd count
		"v2 0 1002000 1 1 1 0",                 // 2 s in the future: skew
	} {
		_, err := parseWindow(bad, now, age, skew)
		require.ErrorIs(t, err, errBadRecord, "%q", bad)
	}
	_, err = parseWindow("v2 0 980000 1 1 1 0", now, age, skew)
	require.ErrorIs(t, err, errTooOld)
}

func TestParseState(t *testing.T) {
	s := state{Epoch: 7, Closed: 5, Open: true, Who: "a"}
	got, err := parseState(s.String())
	require.NoError(t, err)
	require.Equal(t, s, got)
	for _, bad := range []string{"", "v2 7 5 1", "v1 7 5 1 a", "v2 7 5 2 a", "v2 x 5 1 a", "v2 5 7 0 a", "v2 7 -1 0 a"} {
		_, err := parseState(bad)
		require.ErrorIs(t, err, errBadRecord, "%q", bad)
	}
}

func TestConfigValidation(t *testing.T) {
	for _, c := range []Config{
		{Service: "s"},
		{Addr: "x:1"},
		{Addr: "x:1", Service: "s", Instance: "a b"},
		{Addr: "x:1", Service: "s", Interval: -1},
		{Addr: "x:1", Service: "s", Interval: time.Microsecond},
		{Addr: "x:1", Service: "s", Timeout: -1},
		{Addr: "x:1", Service: "s", MaxSkew: -1},
		{Addr: "x:1", Service: "s", MaxInstances: -1},
		{Addr: "x:1", Service: "s", DegradeAfter: -1},
		{Addr: "x:1", Service: "s", Quorum: Quorum{Instances: 1}},
		{Addr: "x:1", Service: "s", Quorum: Quorum{Instances: -2}},
		{Addr: "x:1", Service: "s", Quorum: Quorum{Ratio: 1.5}},
		{Addr: "x:1", Service: "s", Quorum: Quorum{Ratio: math.NaN()}},
	} {
		_, err := New(c)
		require.ErrorIs(t, err, ErrInvalidConfig, "%+v", c)
	}
	f, err := New(Config{Addr: "x:1", Service: "s"})
	require.NoError(t, err)
	require.NotEmpty(t, f.cfg.Instance)
	require.NoError(t, f.Close(), "closing a fleet never started")
}

func TestKeyEscapesSeparators(t *testing.T) {
	require.Equal(t, "a%3Ab%25c", key("a:b%c"))
	require.NotEqual(t, key("a:b")+":"+key("c"), key("a")+":"+key("b:c"))
}
