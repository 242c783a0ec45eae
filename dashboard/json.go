package dashboard

import (
	"fmt"
	"math"
	"reflect"
	"strconv"
	"strings"
	"unicode/utf8"
)

// The stream's own events are written by a plan built once per event type
// from its struct's json tags, appending into the frame's buffer: the same
// bytes as encoding/json (HTML-safe escaping, its float format; checked by
// TestPlanMatchesEncodingJSON), without its per-value reflection walk and
// allocations (BenchmarkEncode; PERFORMANCE.md has the figures).

// plan writes one struct type as a JSON object.
type plan struct {
	fields []planField
}

// planField is one key of the object: key is `"name":`, preceded by a comma
// for every key but the first; index leads to the field through embedded
// structs; sub is the plan of a struct (or of a slice's struct elements).
type planField struct {
	key   string
	index []int
	kind  reflect.Kind
	sub   *plan
}

// newPlan returns the plan of struct type t. It panics for a field it does
// not write (a kind other than those below, a pointer to anything but a
// string, a json tag with options or "-"): the event types are fixed, and
// the tests build every plan.
func newPlan(t reflect.Type) *plan {
	p := &plan{}
	p.add(t, nil)
	for i := range p.fields {
		if i > 0 {
			p.fields[i].key = "," + p.fields[i].key
		}
	}
	return p
}

// add appends t's fields, embedded structs inline at their place (as
// encoding/json orders them), to p.
func (p *plan) add(t reflect.Type, index []int) {
	for i := range t.NumField() {
		f := t.Field(i)
		idx := append(index[:len(index):len(index)], i)
		if f.Anonymous && f.Type.Kind() == reflect.Struct {
			p.add(f.Type, idx)
			continue
		}
		if !f.IsExported() {
			continue
		}
		tag := f.Tag.Get("json")
		if tag == "-" || strings.Contains(tag, ",") {
			panic(fmt.Sprintf("dashboard: no JSON plan for the json tag %q of field %s", tag, f.Name))
		}
		name := tag
		if name == "" {
			name = f.Name
		}
		pf := planField{key: string(appendString(nil, name)) + ":", index: idx, kind: f.Type.Kind()}
		switch pf.kind {
		case reflect.Struct:
			pf.sub = newPlan(f.Type)
		case reflect.Slice:
			pf.sub = newPlan(f.Type.Elem())
		case reflect.Pointer:
			if elem := f.Type.Elem().Kind(); elem != reflect.String {
				panic(fmt.Sprintf("dashboard: no JSON plan for field %s, a pointer to %v", f.Name, elem))
			}
		case reflect.String, reflect.Bool, reflect.Int, reflect.Int64, reflect.Uint64, reflect.Float64:
		default:
			panic(fmt.Sprintf("dashboard: no JSON plan for field %s of kind %v", f.Name, pf.kind))
		}
		for _, q := range p.fields {
			if q.key == pf.key { // the commas come after add
				panic(fmt.Sprintf("dashboard: JSON key %s appears twice in %v", name, t))
			}
		}
		p.fields = append(p.fields, pf)
	}
}

// append writes v, a value of p's struct type, to b. It fails, like
// encoding/json, on a float that JSON cannot carry.
func (p *plan) append(b []byte, v reflect.Value) ([]byte, error) {
	b = append(b, '{')
	for i := range p.fields {
		f := &p.fields[i]
		b = append(b, f.key...)
		fv := v.FieldByIndex(f.index)
		var err error
		switch f.kind {
		case reflect.String:
			b = appendString(b, fv.String())
		case reflect.Bool:
			b = strconv.AppendBool(b, fv.Bool())
		case reflect.Int, reflect.Int64:
			b = strconv.AppendInt(b, fv.Int(), 10)
		case reflect.Uint64:
			b = strconv.AppendUint(b, fv.Uint(), 10)
		case reflect.Float64:
			b, err = appendFloat(b, fv.Float())
		case reflect.Pointer: // to a string (see add)
			if fv.IsNil() {
				b = append(b, "null"...)
			} else {
				b = appendString(b, fv.Elem().String())
			}
		case reflect.Struct:
			b, err = f.sub.append(b, fv)
		case reflect.Slice:
			b, err = f.sub.appendSlice(b, fv)
		}
		if err != nil {
			return b, err
		}
	}
	return append(b, '}'), nil
}

// appendSlice writes the slice v of p's struct type: null when nil.
func (p *plan) appendSlice(b []byte, v reflect.Value) ([]byte, error) {
	if v.IsNil() {
		return append(b, "null"...), nil
	}
	b = append(b, '[')
	for i := range v.Len() {
		if i > 0 {
			b = append(b, ',')
		}
		var err error
		if b, err = p.append(b, v.Index(i)); err != nil {
			return b, err
		}
	}
	return append(b, ']'), nil
}

// appendFloat writes f as encoding/json does: the shortest form that reads
// back as f, in exponent form below 1e-6 and from 1e21, with a one-digit
// negative exponent written without its leading zero.
func appendFloat(b []byte, f float64) ([]byte, error) {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return b, fmt.Errorf("dashboard: unsupported value %v in an event", f)
	}
	format := byte('f')
	if abs := math.Abs(f); abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	b = strconv.AppendFloat(b, f, format, -1, 64)
	if n := len(b); format == 'e' && n >= 4 && b[n-4] == 'e' && b[n-3] == '-' && b[n-2] == '0' {
		b[n-2] = b[n-1]
		b = b[:n-1]
	}
	return b, nil
}

// appendString writes s as a JSON string as encoding/json does with HTML
// escaping (json.Encoder's default): quotes, backslashes, control
// characters, <, > and &, U+2028 and U+2029 escaped; each invalid UTF-8
// byte replaced by \ufffd. Command and group names are user input.
func appendString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		if c := s[i]; c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' && c != '<' && c != '>' && c != '&' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '\\', '"':
				b = append(b, '\\', c)
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
		case r == '\u2028' || r == '\u2029':
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hex[r&0xF])
		default:
			i += size
			continue
		}
		i += size
		start = i
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}
