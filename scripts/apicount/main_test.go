package main

import (
	"os"
	"path/filepath"
	"testing"
)

// writeFiles writes files (path relative to root: content) under root.
func writeFiles(t *testing.T, root string, files map[string]string) {
	t.Helper()
	for name, content := range files {
		path := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func TestCountTreeCountsOnlyWhatAUserCanName(t *testing.T) {
	root := t.TempDir()
	writeFiles(t, root, map[string]string{
		"lib/a.go": `package lib

type Exported struct {
	A, B    int
	hidden  int
	Embedded
	*Other
	embedded
}

type Embedded struct{}
type Other struct{}
type embedded struct{ X int }

type Iface interface {
	Method()
	hidden()
	Embedded2
	~int | ~string
}

type Embedded2 interface{}

type Generic[T any] struct{ V T }

func (Generic[T]) Get() T     { var v T; return v }
func (*Exported) M()          {}
func (Exported) m()           {}
func (embedded) M()           {}
func Func()                   {}
func fn()                     {}
`,
		"lib/b.go": `package lib

const (
	C1, c2 = 1, 2
	C3     = 3
)

var V1, v2 = 1, 2
`,
		"lib/a_test.go":       "package lib\n\nfunc TestOnly() {}\n",
		"lib/internal/x/x.go": "package x\n\nfunc Hidden() {}\n",
		"lib/testdata/t.go":   "package t\n\nfunc Hidden() {}\n",
		"cmd/tool/main.go":    "package main\n\nfunc Exported() {}\n",
		"notes/README":        "no Go here\n",
	})
	counts, err := countTree(root)
	if err != nil {
		t.Fatal(err)
	}
	if len(counts) != 1 || counts[0].dir != "lib" {
		t.Fatalf("counted %+v, want the one package lib", counts)
	}
	// types: Exported Embedded Other Iface Embedded2 Generic; funcs: Func; methods: Get M,
	// and Iface's Method and Embedded2; fields: A B Embedded Other V; consts: C1 C3; vars: V1.
	want := count{dir: "lib", types: 6, funcs: 1, methods: 4, fields: 5, consts: 2, vars: 1}
	if counts[0] != want {
		t.Errorf("count = %+v, want %+v", counts[0], want)
	}
	if got := counts[0].total(); got != 19 {
		t.Errorf("total = %d, want 19", got)
	}
}

func TestCountDirRefusesTwoPackages(t *testing.T) {
	root := t.TempDir()
	writeFiles(t, root, map[string]string{
		"a.go": "package a\n",
		"b.go": "package b\n",
	})
	if _, _, err := countDir(root); err == nil {
		t.Fatal("countDir of a directory with packages a and b: no error")
	}
}
