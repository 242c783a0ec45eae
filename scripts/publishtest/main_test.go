package main

import (
	stdzip "archive/zip"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"

	"golang.org/x/mod/module"
)

func TestNextVersion(t *testing.T) {
	for _, tc := range []struct {
		tags []string
		want string
	}{
		{nil, "v0.1.0"},
		{[]string{"prom/v0.3.0", "v0.2.0-rc.1", "release", "v1"}, "v0.1.0"},
		{[]string{"v0.1.0", "v0.1.1", "prom/v0.3.0", "v0.2.0-rc.1"}, "v0.2.0"},
		{[]string{"v1.9.0", "v1.10.0", "v1.2.3"}, "v1.11.0"},
	} {
		got, err := nextVersion(tc.tags)
		if err != nil || got != tc.want {
			t.Errorf("nextVersion(%q) = %q, %v; want %q", tc.tags, got, err, tc.want)
		}
	}
}

func TestProxyTailDropsDirect(t *testing.T) {
	for goproxy, want := range map[string]string{
		"https://proxy.golang.org,direct":            "https://proxy.golang.org",
		"https://a.example|https://b.example,direct": "https://a.example,https://b.example",
		"direct": "off",
		"off":    "off",
		"":       "off",
	} {
		if got := proxyTail(goproxy); got != want {
			t.Errorf("proxyTail(%q) = %q, want %q", goproxy, got, want)
		}
	}
}

func TestModuleDirAndTagName(t *testing.T) {
	for _, tc := range []struct{ path, dir, tag string }{
		{rootPath, ".", "v0.1.0"},
		{rootPath + "/prom", "prom", "prom/v0.1.0"},
		{rootPath + "/redis/fleet", "redis/fleet", "redis/fleet/v0.1.0"},
	} {
		dir, ok := moduleDir(tc.path)
		if !ok || dir != tc.dir || modulePath(dir) != tc.path || tagName(dir, "v0.1.0") != tc.tag {
			t.Errorf("%s: dir %q %v, tag %q; want dir %q, tag %q", tc.path, dir, ok, tagName(dir, "v0.1.0"), tc.dir, tc.tag)
		}
	}
	if _, ok := moduleDir("github.com/bulwark-go/bulwarkish"); ok {
		t.Error("moduleDir takes github.com/bulwark-go/bulwarkish for a bulwark module")
	}
}

func TestImportableLeavesOutMainInternalAndOtherModules(t *testing.T) {
	list := rootPath + " command " + rootPath + "/command\n" +
		rootPath + " main " + rootPath + "/examples/basic\n" +
		rootPath + " cacheline " + rootPath + "/internal/cacheline\n" +
		rootPath + " x " + rootPath + "/command/internal\n" +
		rootPath + "/prom prom " + rootPath + "/prom\n"
	got := importable(list, rootPath)
	if want := []string{rootPath + "/command"}; !slices.Equal(got, want) {
		t.Errorf("importable = %q, want %q", got, want)
	}
}

// gitRepo makes a git repository in a new directory with files (path: content) committed.
func gitRepo(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, content := range files {
		path := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, args := range [][]string{
		{"init", "-q"},
		{"add", "."},
		{"-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-q", "-m", "files"},
	} {
		cmd := exec.Command("git", args...)
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %q: %v\n%s", args, err, out)
		}
	}
	return dir
}

// zipNames returns the names in the zip file name.
func zipNames(t *testing.T, name string) []string {
	t.Helper()
	r, err := stdzip.OpenReader(name)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var names []string
	for _, f := range r.File {
		names = append(names, f.Name)
	}
	slices.Sort(names)
	return names
}

func TestWriteZipLeavesOutNestedModulesAndCopiesTheLicense(t *testing.T) {
	repo := gitRepo(t, map[string]string{
		"LICENSE":        "license text\n",
		"go.mod":         "module " + rootPath + "\n",
		"command/c.go":   "package command\n",
		"vendor/x/x.go":  "package x\n",
		"prom/go.mod":    "module " + rootPath + "/prom\n",
		"prom/p.go":      "package prom\n",
		"prom/sub/s.go":  "package sub\n",
		"docs/notes.txt": "",
	})
	if err := os.WriteFile(filepath.Join(repo, "notcommitted.go"), []byte("package x\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	tmp := t.TempDir()
	ctx := context.Background()

	root := filepath.Join(tmp, "root.zip")
	if err := writeZip(ctx, root, module.Version{Path: rootPath, Version: "v0.1.0"}, repo, "HEAD", "."); err != nil {
		t.Fatal(err)
	}
	p := rootPath + "@v0.1.0/"
	if got, want := zipNames(t, root), []string{p + "LICENSE", p + "command/c.go", p + "docs/notes.txt", p + "go.mod"}; !slices.Equal(got, want) {
		t.Errorf("root zip holds %q, want %q", got, want)
	}

	prom := filepath.Join(tmp, "prom.zip")
	if err := writeZip(ctx, prom, module.Version{Path: rootPath + "/prom", Version: "v0.1.0"}, repo, "HEAD", "prom"); err != nil {
		t.Fatal(err)
	}
	p = rootPath + "/prom@v0.1.0/"
	if got, want := zipNames(t, prom), []string{p + "LICENSE", p + "go.mod", p + "p.go", p + "sub/s.go"}; !slices.Equal(got, want) {
		t.Errorf("prom zip holds %q, want %q", got, want)
	}
}
