package command

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
	"unicode/utf8"
)

// MaxNameLength is the longest group or command name, in bytes. A name is
// exported many times over (in go-metrics names, Prometheus labels, stream
// events), so its length is bounded like the number of names
// (GroupConfig.MaxCommands).
//
// NewGroup refuses a group name that is longer or not valid UTF-8, and
// Validate a declared command name (GroupConfig.Commands). A command name
// that reaches Execute (from a Namer, WithName or the command's type) is
// never refused: when it is longer, or not valid UTF-8, its command is
// named by its renamed form instead: its valid UTF-8 prefix (each run of
// invalid bytes replaced by U+FFFD), cut so that the whole fits in
// MaxNameLength, then "~" and 16 hex digits of the SHA-256 of the name as
// given. So every name a snapshot, the metrics or the stream show is valid
// UTF-8 and at most MaxNameLength bytes, and two different names never
// share a command: the renamed form of one that is already another name's
// (a valid name spelt like a renamed one) renames it in turn, and in the
// last resort (a digest collision) the call runs as overflowCommand. The
// first call of each renamed name is logged at Warn level, and
// GroupSnapshot.RenamedCommands counts them. A renamed name costs a
// SHA-256 of it on every call: fix the name the log shows.
const MaxNameLength = 256

// renameSuffix is "~" and the 16 hex digits of a renamed form.
const renameSuffix = 1 + 16

// validName reports whether name can name a command as it is: valid UTF-8
// and at most MaxNameLength bytes.
func validName(name string) bool {
	return len(name) <= MaxNameLength && utf8.ValidString(name)
}

// checkName returns an error wrapping ErrInvalidConfig, naming what (such
// as "group name"), if name is empty, longer than MaxNameLength or not
// valid UTF-8.
func checkName(what, name string) error {
	switch {
	case name == "":
		return invalid("%s must not be empty", what)
	case len(name) > MaxNameLength:
		return invalid("%s %q... is %d bytes long, over MaxNameLength (%d)", what, name[:32], len(name), MaxNameLength)
	case !utf8.ValidString(name):
		return invalid("%s %q is not valid UTF-8", what, name)
	}
	return nil
}

// renamed returns the renamed form of name (see MaxNameLength) and the
// SHA-256 of name, which tells two names of the same renamed form apart.
func renamed(name string) (string, *[sha256.Size]byte) {
	sum := sha256.Sum256([]byte(name))
	prefix := strings.ToValidUTF8(name[:min(len(name), MaxNameLength)], "\uFFFD")
	if cut := MaxNameLength - renameSuffix; len(prefix) > cut {
		for !utf8.RuneStart(prefix[cut]) {
			cut--
		}
		prefix = prefix[:cut]
	}
	return prefix + "~" + hex.EncodeToString(sum[:8]), &sum
}

// nameKey returns the key of command name in t: name itself, or, when
// Execute renames it (see MaxNameLength), its renamed form with the
// digest that tells it apart. A valid name that is the key of a renamed
// command (spelt like a renamed form) is renamed in turn.
func (t *commandTable) nameKey(name string) (key string, sum *[sha256.Size]byte) {
	if validName(name) {
		if c := t.names.get(name); c == nil || c.sum == nil {
			return name, nil
		}
	}
	return renamed(name)
}

// find returns the command of key (of a name whose digest, if renamed, is
// sum) in t, or nil; taken reports that key is another name's.
func (t *commandTable) find(key string, sum *[sha256.Size]byte) (c *commandState, taken bool) {
	c = t.names.get(key)
	switch {
	case c == nil:
		return nil, false
	case sum == nil && c.sum == nil, sum != nil && c.sum != nil && *sum == *c.sum:
		return c, false
	}
	return nil, true
}

// known returns the command that takes the calls of name in t without
// adding one: name's own (as given or renamed), the overflow command once
// the group is full or when name's key is another name's; nil when a new
// command (or the overflow command) must be created under the group's
// lock.
func (t *commandTable) known(name string) *commandState {
	key, sum := t.nameKey(name)
	c, taken := t.find(key, sum)
	switch {
	case c != nil:
		return c
	case taken:
		return t.names.get(overflowCommand)
	}
	return t.overflow
}

// quoteName quotes name for a log record, cut to its first 64 bytes.
func quoteName(name string) string {
	if len(name) > 64 {
		return fmt.Sprintf("%q... (%d bytes)", name[:64], len(name))
	}
	return fmt.Sprintf("%q", name)
}
