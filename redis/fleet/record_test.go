package fleet

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestParseWindowRejectsBadData(t *testing.T) {
	const now = 1_000_000
	age, skew := 10*time.Second, time.Second
	good := window{At: now, Reset: now - 5000, Success: 7, Failure: 3, Timeout: 1, Slow: 2}
	w, err := parseWindow(good.String(), now, age, skew)
	require.NoError(t, err)
	require.Equal(t, good, w)
	for _, bad := range []string{
		"", "garbage", "v2 1000000 0 1 1 1 0", "v1 1000000 0 1 1 1", "v1 1000000 0 1 1 1 0 9",
		"v1 1000000 0 -1 1 1 0", "v1 1000000 0 x 1 1 0", "v1 1000000 0 1 1 1 5", // slow > success
		"v1 1000000 1000001 1 1 1 0",           // reset after at
		"v1 1000000 0 1 99999999999999999 1 0", // absurd count
		"v1 1002000 0 1 1 1 0",                 // 2 s in the future: skew
	} {
		_, err := parseWindow(bad, now, age, skew)
		require.ErrorIs(t, err, errBadRecord, "%q", bad)
	}
	_, err = parseWindow("v1 980000 0 1 1 1 0", now, age, skew)
	require.ErrorIs(t, err, errTooOld)
}

func TestParseVerdict(t *testing.T) {
	const now = 1_000_000
	v := verdict{Open: true, At: now - 10, Instance: "a"}
	got, err := parseVerdict(v.String(), now, time.Minute, time.Second)
	require.NoError(t, err)
	require.Equal(t, v, got)
	for _, bad := range []string{"", "v1 open", "v1 ajar 999990 a", "v1 open x a", "v1 open 1003000 a", "v1 open 1 a"} {
		_, err := parseVerdict(bad, now, time.Minute, time.Second)
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
