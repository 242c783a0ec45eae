package rules

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strconv"
	"strings"
	"time"
)

// Parse reads a rules document strictly: a syntax error, an unknown field,
// a value of the wrong type, a key that an object repeats (as the decoder
// matches keys to fields, case aside) and an explicit zero for a field
// whose zero would silently mean a default (see the package doc) are each
// an error wrapping ErrInvalid that gives its line and column, and so is
// trailing data after the document.
func Parse(data []byte) (*Document, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var doc Document
	if err := dec.Decode(&doc); err != nil {
		return nil, located(data, err)
	}
	end := int(dec.InputOffset())
	if rest := bytes.TrimLeft(data[end:], " \t\r\n"); len(rest) > 0 {
		return nil, fmt.Errorf("%w: %s: data after the document", ErrInvalid, position(data, len(data)-len(rest)))
	}
	if doc.Groups == nil {
		return nil, fmt.Errorf("%w: no \"groups\" object (an empty one is {\"groups\": {}})", ErrInvalid)
	}
	if err := refusedValue(data); err != nil {
		return nil, err
	}
	return &doc, nil
}

// refusedValue returns an error for the first repeated key or explicit
// zero of a field tagged rules:"nonzero" in data, a document the decoder
// accepted, or nil if there is none.
func refusedValue(data []byte) error {
	var why string
	e, found := find(data, func(e entry) bool {
		switch {
		case e.firstAt >= 0:
			why = fmt.Sprintf("duplicate key %q (first at %s): a repeated key would silently replace the first", e.key, position(data, e.firstAt))
		case e.field != nil && e.field.Tag.Get("rules") == "nonzero" && isZero(e.value):
			why = fmt.Sprintf("field %s: %s would silently mean the default: omit the field for the default", e.path, data[e.at:e.end])
			if e.field.Type == reflect.TypeFor[*Timeout]() {
				why += `, or write "none" for no timeout`
			}
		default:
			return false
		}
		return true
	})
	switch {
	case !found:
		return nil
	case e.firstAt >= 0:
		return fmt.Errorf("%w: %s: %s", ErrInvalid, position(data, e.keyAt), why)
	}
	return fmt.Errorf("%w: %s: %s", ErrInvalid, position(data, e.at), why)
}

// isZero reports whether v, a JSON value as json.Decoder.Token reads it,
// is a zero number or a string that reads as a zero duration ("0s").
func isZero(v json.Token) bool {
	switch v := v.(type) {
	case float64:
		return v == 0
	case string:
		d, err := time.ParseDuration(v)
		return err == nil && d == 0
	}
	return false
}

// located turns a decoding error into one that says where in data it is.
func located(data []byte, err error) error {
	var syntax *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &syntax):
		return fmt.Errorf("%w: %s: %w", ErrInvalid, position(data, int(syntax.Offset)-1), err)
	case errors.As(err, &typ) && typ.Type == reflect.TypeFor[Duration]():
		return durationError(data, typ)
	case errors.As(err, &typ):
		return fmt.Errorf("%w: %s: field %s: %w", ErrInvalid, position(data, int(typ.Offset)), typ.Field, err)
	case errors.Is(err, io.EOF):
		return fmt.Errorf("%w: empty document", ErrInvalid)
	}
	if name, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
		// The decoder gives neither offset nor field path: find the key.
		name, _ = strconv.Unquote(name)
		if hint, ok := movedFields[name]; ok {
			err = fmt.Errorf("%w (%s)", err, hint)
		}
		if e, ok := find(data, func(e entry) bool { return e.unknown && e.key == name }); ok {
			return fmt.Errorf("%w: %s: %w", ErrInvalid, position(data, e.keyAt), err)
		}
	}
	return fmt.Errorf("%w: %w", ErrInvalid, err)
}

// movedFields maps the fields of earlier formats to the hint that says
// where they are now, for the error of a document written for one.
var movedFields = map[string]string{
	"openDuration":      breakerMoved(`"open": {"duration": …}`),
	"backoffMultiplier": breakerMoved(`"open": {"backoff": …}`),
	"maxOpenDuration":   breakerMoved(`"open": {"max": …}`),
	"halfOpenProbes":    breakerMoved(`"halfOpen": {"probes": …}`),
	"halfOpenSuccesses": breakerMoved(`"halfOpen": {"successes": …}`),
	"halfOpenMaxWait":   breakerMoved(`"halfOpen": {"maxWait": …}`),
	"rampUp":            breakerMoved(`"ramp": {"duration": …}`),
	"rampUpFloor":       breakerMoved(`"ramp": {"floor": …}`),
	"slowCallDuration": `a group's or a command's slow-call threshold is its command breaker's now: write ` +
		`"commandBreaker" or the command's "breaker": {"slowCallDuration": …, "slowCallRatio": …}`,
}

// breakerMoved is the hint of a breaker field of the first, flat format.
func breakerMoved(now string) string {
	return "a breaker's open, halfOpen and ramp fields are objects now: write " + now
}

// durationError says where in data the duration typ refuses is, and why
// (typ.Value is the value as written: see Duration.UnmarshalJSON).
func durationError(data []byte, typ *json.UnmarshalTypeError) error {
	_, why := parseDuration([]byte(typ.Value))
	if e, ok := find(data, func(e entry) bool {
		return e.path == typ.Field && bytes.HasPrefix(data[e.at:], []byte(typ.Value))
	}); ok {
		return fmt.Errorf("%w: %s: field %s: %w", ErrInvalid, position(data, e.at), typ.Field, why)
	}
	return fmt.Errorf("%w: field %s: %w", ErrInvalid, typ.Field, why)
}

// entry is a value of a document as find visits it. The decoder gives the
// offset of neither an unknown field nor a refused duration, nor sees a
// repeated key: find does.
type entry struct {
	// path is the field path of the value: struct fields by JSON name, map
	// keys left out (as json.UnmarshalTypeError.Field gives it); "\x00"
	// for the value of an unknown field or an array, which matches no field.
	path string
	// field is the struct field the value sets; nil for the document, a
	// map's or an array's value, and an unknown field's.
	field *reflect.StructField
	// key is the object key before the value, at offset keyAt; "" and -1
	// for the document and an array's value.
	key   string
	keyAt int
	// unknown: key names no field of its struct.
	unknown bool
	// firstAt is the offset of an earlier key of the same object that sets
	// the same field or map entry (the decoder matches field names as
	// encoding/json does, preferring an exact match but accepting one that
	// differs in case only); -1 if none.
	firstAt int
	// value is the value's first token (json.Decoder.Token), at offsets
	// [at, end) of the document for a scalar; a delimiter for an object or
	// an array.
	value   json.Token
	at, end int
}

// find walks data, a document the decoder read, and returns the first
// entry, in document order, that visit accepts.
func find(data []byte, visit func(entry) bool) (entry, bool) {
	dec := json.NewDecoder(bytes.NewReader(data))
	return walk(dec, data, reflect.TypeFor[Document](), entry{keyAt: -1, firstAt: -1}, visit)
}

// next returns the offset in data of the next token dec reads.
func next(dec *json.Decoder, data []byte) int {
	at := int(dec.InputOffset())
	return at + len(data[at:]) - len(bytes.TrimLeft(data[at:], " \t\r\n:,"))
}

// field is a struct field as walk matches keys to it.
type field struct {
	sf   reflect.StructField
	path string // the JSON name, after the Go names of the structs it is promoted from
}

// fieldsOf returns the fields of struct type t by JSON name.
func fieldsOf(t reflect.Type) map[string]field {
	fields := map[string]field{}
	for _, f := range reflect.VisibleFields(t) {
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "" || f.Anonymous {
			continue
		}
		for i := len(f.Index) - 1; i > 0; i-- {
			name = t.FieldByIndex(f.Index[:i]).Name + "." + name
		}
		fields[name[strings.LastIndexByte(name, '.')+1:]] = field{f, name}
	}
	return fields
}

// lookup returns the field that key sets, as encoding/json matches it:
// the exact name, else one equal but for case.
func lookup(fields map[string]field, key string) (string, field, bool) {
	if f, ok := fields[key]; ok {
		return key, f, true
	}
	for name, f := range fields {
		if strings.EqualFold(name, key) {
			return name, f, true
		}
	}
	return "", field{}, false
}

// walk reads the next value from dec, of Go type t, described by e (its
// position and token aside), and returns the first entry, in document
// order, that visit accepts: e's or one within the value.
func walk(dec *json.Decoder, data []byte, t reflect.Type, e entry, visit func(entry) bool) (entry, bool) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	e.at = next(dec, data)
	tok, err := dec.Token()
	if err != nil {
		return entry{}, false
	}
	e.value, e.end = tok, int(dec.InputOffset())
	if visit(e) {
		return e, true
	}
	if d, ok := tok.(json.Delim); !ok || d == '}' || d == ']' {
		return entry{}, false
	}
	var fields map[string]field
	if t.Kind() == reflect.Struct {
		fields = fieldsOf(t)
	}
	seen := map[string]int{} // offset of each key so far, by field or map key
	for dec.More() {
		sub := entry{path: "\x00", keyAt: -1, firstAt: -1}
		elem := reflect.TypeFor[any]() // an array's value (no rule has one) or an unknown field's: walked past
		if tok == json.Delim('{') {
			sub.keyAt = next(dec, data)
			key, err := dec.Token()
			if err != nil {
				return entry{}, false
			}
			sub.key = key.(string)
			id := sub.key
			switch name, f, ok := lookup(fields, sub.key); {
			case t.Kind() == reflect.Map:
				elem, sub.path = t.Elem(), e.path
			case t.Kind() != reflect.Struct: // within an unknown field's value
			case ok:
				id, sub.field = name, &f.sf
				elem, sub.path = f.sf.Type, strings.TrimPrefix(e.path+"."+f.path, ".")
			default:
				sub.unknown = true
			}
			if first, ok := seen[id]; ok {
				sub.firstAt = first
			} else {
				seen[id] = sub.keyAt
			}
		}
		if found, ok := walk(dec, data, elem, sub, visit); ok {
			return found, true
		}
	}
	_, _ = dec.Token() // the closing delimiter
	return entry{}, false
}

// position returns "line L, column C" of byte offset off in data.
func position(data []byte, off int) string {
	off = min(max(off, 0), len(data))
	line := 1 + bytes.Count(data[:off], []byte("\n"))
	col := off - bytes.LastIndexByte(data[:off], '\n')
	return fmt.Sprintf("line %d, column %d", line, col)
}
