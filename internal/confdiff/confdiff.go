// Package confdiff lists what changed between two values of one
// configuration type, for the log record of a live reconfiguration.
package confdiff

import (
	"fmt"
	"log/slog"
	"maps"
	"reflect"
	"slices"
)

// Diff returns one attribute per exported field whose value differs between
// old and new (two values of the same struct type), keyed by the field's
// path (Breaker.FailureRatio, Commands[get].Timeout) with the value
// "old -> new". Nested structs, pointers to structs (nil reads as the zero
// value) and maps with string keys (a missing key reads as the zero value)
// are walked and slices compared whole; functions, interfaces and channels
// are skipped, as are structs without exported fields (a *slog.Logger).
// Fields come in declaration order, map keys sorted.
func Diff(old, new any) []slog.Attr {
	var out []slog.Attr
	walk("", reflect.ValueOf(old), reflect.ValueOf(new), &out)
	return out
}

func walk(path string, a, b reflect.Value, out *[]slog.Attr) {
	switch a.Kind() {
	case reflect.Func, reflect.Interface, reflect.Chan, reflect.UnsafePointer:
	case reflect.Pointer:
		if a.IsNil() && b.IsNil() {
			return
		}
		walk(path, elem(a), elem(b), out)
	case reflect.Struct:
		for i := range a.NumField() {
			if f := a.Type().Field(i); f.IsExported() {
				walk(join(path, f.Name), a.Field(i), b.Field(i), out)
			}
		}
	case reflect.Map:
		if a.Type().Key().Kind() != reflect.String {
			return
		}
		keys := map[string]bool{}
		for _, m := range []reflect.Value{a, b} {
			for _, k := range m.MapKeys() {
				keys[k.String()] = true
			}
		}
		for _, k := range slices.Sorted(maps.Keys(keys)) {
			kv := reflect.ValueOf(k).Convert(a.Type().Key())
			walk(fmt.Sprintf("%s[%s]", path, k), entry(a, kv), entry(b, kv), out)
		}
	case reflect.Slice:
		if !reflect.DeepEqual(a.Interface(), b.Interface()) {
			*out = append(*out, slog.String(path, fmt.Sprintf("%v -> %v", a, b)))
		}
	default:
		if !a.Equal(b) {
			*out = append(*out, slog.String(path, fmt.Sprintf("%v -> %v", a, b)))
		}
	}
}

// elem returns what pointer p points to, or the zero value of its element
// type when p is nil.
func elem(p reflect.Value) reflect.Value {
	if p.IsNil() {
		return reflect.Zero(p.Type().Elem())
	}
	return p.Elem()
}

// entry returns m[k], or the zero value of m's element type.
func entry(m, k reflect.Value) reflect.Value {
	if v := m.MapIndex(k); v.IsValid() {
		return v
	}
	return reflect.Zero(m.Type().Elem())
}

func join(path, name string) string {
	if path == "" {
		return name
	}
	return path + "." + name
}
