// Package wrap tells how command.Execute sees a command: its name and its
// fallback. Package command decides with it, and bulwark's packages that
// wrap a command in another (faultinject) use it to keep what Execute saw
// of the inner one.
package wrap

import (
	"context"
	"reflect"
)

// NoFallback is command.NoFallback: embedded in a command, it makes
// Fallback report none, even for a Fallback method promoted from another
// embedded type.
type NoFallback struct{}

func (NoFallback) noFallback() {}

// noFallbacker is implemented by the commands that embed NoFallback.
type noFallbacker interface{ noFallback() }

// Fallbacker is command.Fallbacker.
type Fallbacker[T any] interface {
	Fallback(ctx context.Context, err error) (T, error)
}

// Name returns the name Execute gives cmd when the call sets none: its Name
// method's, else its type name without package or pointer ("getUser" for a
// getUser or a *getUser). It returns "" for a nil cmd.
func Name(cmd any) string {
	switch c := cmd.(type) {
	case nil:
		return ""
	case interface{ Name() string }:
		return c.Name()
	}
	return TypeName(reflect.TypeOf(cmd))
}

// TypeName returns the default name of a command of type t: its type name
// without package or pointer.
func TypeName(t reflect.Type) string {
	for t.Kind() == reflect.Pointer && t.Name() == "" {
		t = t.Elem()
	}
	if n := t.Name(); n != "" {
		return n
	}
	return t.String()
}

// Fallback returns cmd's fallback as Execute sees it: cmd as a
// Fallbacker[T], or false when cmd has no Fallback of that signature or
// embeds NoFallback.
func Fallback[T any](cmd any) (Fallbacker[T], bool) {
	fb, ok := cmd.(Fallbacker[T])
	if _, never := cmd.(noFallbacker); never || !ok {
		return nil, false
	}
	return fb, true
}
