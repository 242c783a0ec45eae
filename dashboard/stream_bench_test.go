package dashboard

import (
	"fmt"
	"testing"

	"github.com/bulwark-go/bulwark/command"
)

// bigSnapshot has 5 groups of 10 commands, each command with three breaker
// transitions.
func bigSnapshot() command.Snapshot {
	base := sampleSnapshot()
	users := base.Groups[1]
	var snap command.Snapshot
	for g := range 5 {
		grp := users
		grp.Name = fmt.Sprintf("group%d", g)
		grp.Commands = nil
		for c := range 10 {
			cmd := users.Commands[0] // the one with transitions
			cmd.Name = fmt.Sprintf("Command%02d", c)
			cmd.Group = grp.Name
			grp.Commands = append(grp.Commands, cmd)
		}
		snap.Groups = append(snap.Groups, grp)
	}
	return snap
}

// BenchmarkEncode measures one frame of 50 commands and 5 pools: the work
// a hub does per tick, whatever the number of clients.
func BenchmarkEncode(b *testing.B) {
	snap := bigSnapshot()
	var e encoder
	data, err := e.encode(snap, 0)
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		if data, err = e.encode(snap, len(data)); err != nil {
			b.Fatal(err)
		}
	}
}
