package dashboard

import (
	"bytes"
	"encoding/json"
	"math"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/bulwark-go/bulwark/command"
)

// oddPieces are the parts of the strings the plan tests write: every class
// of byte encoding/json escapes, multi-byte runes, the two line separators
// it escapes, and invalid UTF-8.
var oddPieces = []string{
	"a", "Z", " ", "GetUser", `"`, `\`, "/", "<", ">", "&", "\x00", "\x01", "\x1f", "\b", "\f", "\n",
	"\r", "\t", "\x7f", "é", "日本", "\u2028", "\u2029", "\u2027", "🙂", "\uFFFD", "\xff", "\xe2\x80",
	"\xc3", "\xed\xa0\x80", "'",
}

// oddFloats are floats at the edges of encoding/json's formats.
var oddFloats = []float64{
	0, math.Copysign(0, -1), 1, -1, 0.1, 1.0 / 3, 1e-6, 9.99e-7, 1e-7, -1e-7, 1e-9, 1e-10, 1e-300,
	5e-324, 1e20, 9.99e20, 1e21, -1e21, 1.5e22, 1e100, math.MaxFloat64, 123456789.125, 0.3333,
	40.0 / 101, 2.5, 3.2,
}

func randString(r *rand.Rand) string {
	var b strings.Builder
	for range r.IntN(6) {
		b.WriteString(oddPieces[r.IntN(len(oddPieces))])
	}
	return b.String()
}

// fillRandom sets every exported field of v (embedded structs, nested
// structs, slices and pointers included) to a random value.
func fillRandom(r *rand.Rand, v reflect.Value) {
	switch v.Kind() {
	case reflect.Struct:
		for i := range v.NumField() {
			if f := v.Type().Field(i); f.IsExported() || f.Anonymous {
				fillRandom(r, v.Field(i))
			}
		}
	case reflect.String:
		v.SetString(randString(r))
	case reflect.Bool:
		v.SetBool(r.IntN(2) == 1)
	case reflect.Int, reflect.Int64:
		switch r.IntN(4) {
		case 0:
			v.SetInt(int64(r.IntN(100)))
		case 1:
			v.SetInt(-r.Int64())
		case 2:
			v.SetInt([]int64{math.MinInt64, math.MaxInt64, 0, -1}[r.IntN(4)])
		default:
			v.SetInt(r.Int64())
		}
	case reflect.Uint64:
		v.SetUint(r.Uint64() >> r.IntN(64))
	case reflect.Float64:
		if r.IntN(2) == 0 {
			v.SetFloat(oddFloats[r.IntN(len(oddFloats))])
		} else {
			v.SetFloat(r.NormFloat64() * math.Pow(10, float64(r.IntN(50)-25)))
		}
	case reflect.Pointer:
		if r.IntN(2) == 0 {
			v.SetZero()
			return
		}
		v.Set(reflect.New(v.Type().Elem()))
		fillRandom(r, v.Elem())
	case reflect.Slice:
		n := r.IntN(4) - 1 // -1: nil
		if n < 0 {
			v.SetZero()
			return
		}
		v.Set(reflect.MakeSlice(v.Type(), n, n))
		for i := range n {
			fillRandom(r, v.Index(i))
		}
	default:
		panic("fillRandom: kind " + v.Kind().String())
	}
}

// TestPlanMatchesEncodingJSON writes thousands of random values of each
// event type with its plan and with encoding/json: the bytes must be the
// same, odd strings (quotes, control characters, HTML, U+2028, invalid
// UTF-8) and floats at every format edge included.
func TestPlanMatchesEncodingJSON(t *testing.T) {
	r := rand.New(rand.NewPCG(24, 1))
	for _, tc := range []struct {
		p *plan
		v any
	}{
		{hystrixCommandPlan, new(hystrixCommand)},
		{hystrixThreadPoolPlan, new(hystrixThreadPool)},
		{bulwarkCommandPlan, new(bulwarkCommand)},
		{bulwarkGroupPlan, new(bulwarkGroup)},
	} {
		v := reflect.ValueOf(tc.v).Elem()
		for range 3000 {
			fillRandom(r, v)
			want, err := json.Marshal(tc.v)
			require.NoError(t, err)
			got, err := tc.p.append([]byte("x"), v)
			require.NoError(t, err)
			require.Equal(t, string(want), string(got[1:]), "%T %+v", tc.v, tc.v)
		}
	}
}

// TestPlanRefusesWhatJSONCannotCarry: a NaN or an infinity fails the
// event, as it fails encoding/json, rather than writing invalid JSON.
func TestPlanRefusesWhatJSONCannotCarry(t *testing.T) {
	for _, f := range []float64{math.NaN(), math.Inf(1), math.Inf(-1)} {
		e := bulwarkGroup{AdaptiveLatencyMs: f}
		_, jerr := json.Marshal(&e)
		require.Error(t, jerr)
		_, err := bulwarkGroupPlan.append(nil, reflect.ValueOf(&e).Elem())
		require.Error(t, err, "%v", f)
	}
}

// jsonFrame is the frame encode wrote with encoding/json, one json.Encoder
// call per event, before the plans: the reference the plans must match.
func jsonFrame(t *testing.T, snap command.Snapshot) []byte {
	var e encoder
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	event := func(v any) {
		buf.Write(dataPrefix)
		require.NoError(t, enc.Encode(v))
		buf.WriteByte('\n')
	}
	now := snap.Time.UnixMilli()
	gs := snap.Groups
	for i := range gs {
		for j := range gs[i].Commands {
			e.hc.fill(now, &gs[i], &gs[i].Commands[j])
			event(&e.hc)
		}
	}
	for i := range gs {
		if isPool(&gs[i]) {
			e.hp.fill(now, &gs[i])
			event(&e.hp)
		}
	}
	for i := range gs {
		for j := range gs[i].Commands {
			e.bc.fill(now, &gs[i], &gs[i].Commands[j])
			event(&e.bc)
		}
	}
	for i := range gs {
		e.bg.fill(now, &gs[i])
		event(&e.bg)
	}
	buf.Write(ping)
	return buf.Bytes()
}

// TestEncodeMatchesEncodingJSON: whole frames of sample snapshots, their
// group and command names replaced by odd strings, are byte for byte the
// frames encoding/json wrote, through one encoder reused from frame to
// frame as a hub reuses it.
func TestEncodeMatchesEncodingJSON(t *testing.T) {
	r := rand.New(rand.NewPCG(24, 2))
	var e encoder
	size := 0
	for i := range 200 {
		snap := sampleSnapshot()
		if i%2 == 1 {
			snap = bigSnapshot()
		}
		snap.Time = snap.Time.Add(1e6 * time.Duration(i))
		if i > 0 {
			for g := range snap.Groups {
				grp := &snap.Groups[g]
				grp.Name = randString(r)
				for c := range grp.Commands {
					grp.Commands[c].Name = randString(r)
					grp.Commands[c].InFlight = r.Int64N(100)
				}
			}
		}
		want := jsonFrame(t, snap)
		got, err := e.encode(snap, size)
		require.NoError(t, err)
		require.Equal(t, string(want), string(got))
		size = len(got)
	}
}
