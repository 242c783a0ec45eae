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
)

// Parse reads a rules document strictly: a syntax error, an unknown field
// or a value of the wrong type is an error wrapping ErrInvalid that gives
// its line and column, and so is trailing data after the document.
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
	return &doc, nil
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
		if off := find(data, place{unknown: name}); off >= 0 {
			return fmt.Errorf("%w: %s: %w", ErrInvalid, position(data, off), err)
		}
	}
	return fmt.Errorf("%w: %w", ErrInvalid, err)
}

// durationError says where in data the duration typ refuses is, and why
// (typ.Value is the value as written: see Duration.UnmarshalJSON).
func durationError(data []byte, typ *json.UnmarshalTypeError) error {
	_, why := parseDuration([]byte(typ.Value))
	match := func(v []byte) bool { return bytes.HasPrefix(v, []byte(typ.Value)) }
	if off := find(data, place{field: typ.Field, match: match}); off >= 0 {
		return fmt.Errorf("%w: %s: field %s: %w", ErrInvalid, position(data, off), typ.Field, why)
	}
	return fmt.Errorf("%w: field %s: %w", ErrInvalid, typ.Field, why)
}

// place is what find looks for: the first value whose field path is field
// (struct fields by JSON name, map keys left out, as
// json.UnmarshalTypeError.Field gives it) that match accepts, or, if match
// is nil, the first object key equal to unknown that names no field of its
// struct. The decoder gives the offset of neither.
type place struct {
	field   string
	match   func(value []byte) bool
	unknown string
}

// find returns the offset in data, a document the decoder refused, of the
// place p, or -1 if there is none.
func find(data []byte, p place) int {
	dec := json.NewDecoder(bytes.NewReader(data))
	return walk(dec, data, reflect.TypeFor[Document](), "", p)
}

// next returns the offset in data of the next token dec reads.
func next(dec *json.Decoder, data []byte) int {
	at := int(dec.InputOffset())
	return at + len(data[at:]) - len(bytes.TrimLeft(data[at:], " \t\r\n:,"))
}

// walk reads the next value from dec, of Go type t at field path path,
// and returns find's answer within it.
func walk(dec *json.Decoder, data []byte, t reflect.Type, path string, p place) int {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	start := next(dec, data)
	tok, err := dec.Token()
	if err != nil {
		return -1
	}
	if p.match != nil && path == p.field && p.match(data[start:]) {
		return start
	}
	if d, ok := tok.(json.Delim); !ok || d == '}' || d == ']' {
		return -1
	}
	type fieldOf struct {
		typ  reflect.Type
		path string // the JSON name, after the Go names of the structs it is promoted from
	}
	fields := map[string]fieldOf{}
	if t.Kind() == reflect.Struct {
		for _, f := range reflect.VisibleFields(t) {
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			if name == "" || f.Anonymous {
				continue
			}
			for i := len(f.Index) - 1; i > 0; i-- {
				name = t.FieldByIndex(f.Index[:i]).Name + "." + name
			}
			fields[name[strings.LastIndexByte(name, '.')+1:]] = fieldOf{f.Type, name}
		}
	}
	for dec.More() {
		elem, sub := t, "\x00" // an array's value (no rule has one) or an unknown field: walked past, never matched
		if tok == json.Delim('{') {
			keyAt := next(dec, data)
			key, err := dec.Token()
			if err != nil {
				return -1
			}
			switch f, ok := fields[key.(string)]; {
			case t.Kind() == reflect.Map:
				elem, sub = t.Elem(), path
			case ok:
				elem, sub = f.typ, strings.TrimPrefix(path+"."+f.path, ".")
			case t.Kind() == reflect.Struct && p.match == nil && key == p.unknown:
				return keyAt
			}
		}
		if off := walk(dec, data, elem, sub, p); off >= 0 {
			return off
		}
	}
	_, _ = dec.Token() // the closing delimiter
	return -1
}

// position returns "line L, column C" of byte offset off in data.
func position(data []byte, off int) string {
	off = min(max(off, 0), len(data))
	line := 1 + bytes.Count(data[:off], []byte("\n"))
	col := off - bytes.LastIndexByte(data[:off], '\n')
	return fmt.Sprintf("line %d, column %d", line, col)
}
