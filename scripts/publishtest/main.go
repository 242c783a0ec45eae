// Command publishtest proves that each published bulwark module installs the way a user
// installs it: with go get from a module proxy, into an empty module, where the replace
// directives of the repository's go.mod files count for nothing.
//
// It pretends that one commit (HEAD by default) is tagged for every published module at one
// version (by default the next minor after the newest root tag, v0.1.0 before the first) and
// serves those modules from a module proxy in a temporary directory (GOPROXY=file://…), in the
// proxy's layout (@v/list, .info, .mod, .zip). It makes the zips with golang.org/x/mod/zip from
// git archive of the commit, as the go command makes them from a tag: no nested module's files,
// no vendor/, the root LICENSE copied into a nested module that has none. A bulwark module that
// a served go.mod requires at another version is served from its tag (v0.1.0 for the root,
// prom/v0.1.0 for prom), so a nested module that needs a newer root than the one it requires
// fails here, although replace ../ hides that in the repository. Then, for each published module,
// in an empty module of its own with GOWORK=off, GOTOOLCHAIN=local and a fresh module cache, it
// runs what a user runs:
//
//	go get MODULE@VERSION
//	go mod tidy    (after writing a main that imports every package of MODULE a user can import)
//	go build .
//
// Third-party modules come from the local module cache first, then from the GOPROXY in force.
// It fails on any step that fails, on a version that a published go.mod requires and no proxy
// could serve (the zero pseudo-version v0.0.0-00010101000000-000000000000 above all), on a
// go.mod in a directory that neither list below names, and on a missing LICENSE. It deletes
// everything it wrote. scripts/test.sh runs it; docs/RELEASING.md says why and when else.
//
//	go -C scripts/publishtest run . [-rev REV] [-version vX.Y.Z]
package main

import (
	stdzip "archive/zip"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"os/signal"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"golang.org/x/mod/modfile"
	"golang.org/x/mod/module"
	"golang.org/x/mod/semver"
	"golang.org/x/mod/zip"
)

// rootPath is the library's module path; every bulwark module's path is it or starts with it.
const rootPath = "github.com/bulwark-go/bulwark"

// published are the directories (from the repository root) of the modules that users install,
// in the order they are tagged (docs/RELEASING.md); unpublished are those of the modules that
// are never tagged. Every directory with a go.mod must be in one of the two.
var (
	published   = []string{".", "durable", "prom", "redis", "grpc", "otel"}
	unpublished = []string{"bench", "browsertest", "scripts/publishtest"}
)

func main() {
	rev := flag.String("rev", "HEAD", "the commit to pretend is tagged")
	version := flag.String("version", "",
		"the version to pretend it is tagged at (default: the next minor after the newest root tag; v0.1.0 before the first)")
	flag.Usage = func() {
		fmt.Fprintln(flag.CommandLine.Output(), "usage: go -C scripts/publishtest run . [-rev REV] [-version vX.Y.Z]")
		flag.PrintDefaults()
	}
	flag.Parse()
	if flag.NArg() > 0 {
		flag.Usage()
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, *rev, *version)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "publishtest:", err)
		os.Exit(1)
	}
}

// run publishes rev as version to a file proxy and installs each published module from it.
func run(ctx context.Context, rev, version string) error {
	repo, err := git(ctx, ".", "rev-parse", "--show-toplevel")
	if err != nil {
		return err
	}
	commit, err := git(ctx, repo, "rev-parse", "--verify", rev+"^{commit}")
	if err != nil {
		return err
	}
	if version == "" {
		tags, err := git(ctx, repo, "tag", "--list")
		if err != nil {
			return err
		}
		if version, err = nextVersion(strings.Fields(tags)); err != nil {
			return err
		}
	} else if semver.Canonical(version) != version || semver.Build(version) != "" {
		return fmt.Errorf("-version %q: want a canonical semantic version such as v0.1.0", version)
	}
	problems, err := checkTree(ctx, repo, commit)
	if err != nil {
		return err
	}
	if rev == "HEAD" {
		dirty, err := git(ctx, repo, "status", "--porcelain", "--untracked-files=no")
		if err != nil {
			return err
		}
		if dirty != "" {
			fmt.Println("note: uncommitted changes are not published (git archive reads the commit)")
		}
	}

	tmp, err := os.MkdirTemp("", "bulwark-publishtest-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	p := &proxy{repo: repo, dir: filepath.Join(tmp, "proxy")}
	unservable, err := p.serve(ctx, release{rev: commit, label: rev, version: version})
	if err != nil {
		return err
	}
	problems = append(problems, unservable...)
	fmt.Printf("serving %s (%s) as %s from file://%s:\n", rev, commit[:12], version, p.dir)
	for _, m := range p.served {
		fmt.Printf("    %s %s (from %s)\n", m.path, m.version, m.from)
	}

	env, err := userEnv(ctx, tmp, p.dir)
	if err != nil {
		return err
	}
	for _, dir := range published {
		if err := ctx.Err(); err != nil {
			return err
		}
		start := time.Now()
		got, err := install(ctx, tmp, env, modulePath(dir), version)
		took := time.Since(start).Round(100 * time.Millisecond)
		if err != nil {
			fmt.Printf("FAIL %s@%s (%v)\n", modulePath(dir), version, took)
			problems = append(problems, err.Error())
			continue
		}
		fmt.Printf("ok   %s@%s: %s (%v)\n", modulePath(dir), version, got, took)
	}
	if len(problems) > 0 {
		return fmt.Errorf("%d problem(s):\n%s", len(problems), strings.Join(problems, "\n"))
	}
	return nil
}

// nextVersion returns the version the next release carries: the next minor after the newest
// root tag (a tag vX.Y.Z without prerelease or build suffix), v0.1.0 when there is none.
func nextVersion(tags []string) (string, error) {
	newest := ""
	for _, t := range tags {
		if semver.Canonical(t) != t || semver.Prerelease(t) != "" {
			continue
		}
		if newest == "" || semver.Compare(t, newest) > 0 {
			newest = t
		}
	}
	if newest == "" {
		return "v0.1.0", nil
	}
	var major, minor int
	if _, err := fmt.Sscanf(semver.MajorMinor(newest), "v%d.%d", &major, &minor); err != nil {
		return "", fmt.Errorf("tag %s: %w", newest, err)
	}
	return fmt.Sprintf("v%d.%d.0", major, minor+1), nil
}

// checkTree checks that every go.mod at commit is in a directory that published or unpublished
// names and that each published one exists; it returns as a problem a missing LICENSE.
func checkTree(ctx context.Context, repo, commit string) (problems []string, err error) {
	files, err := git(ctx, repo, "ls-tree", "-r", "--name-only", commit)
	if err != nil {
		return nil, err
	}
	names := strings.Split(files, "\n")
	for _, name := range names {
		if path.Base(name) != "go.mod" {
			continue
		}
		dir := path.Dir(name)
		if !slices.Contains(published, dir) && !slices.Contains(unpublished, dir) {
			return nil, fmt.Errorf("%s: a module that neither published nor unpublished (scripts/publishtest/main.go) names: "+
				"add it to one, and to docs/RELEASING.md", name)
		}
	}
	for _, dir := range published {
		if !slices.Contains(names, path.Join(dir, "go.mod")) {
			return nil, fmt.Errorf("%s: published lists it, but commit %s has no such file", path.Join(dir, "go.mod"), commit[:12])
		}
	}
	if !slices.Contains(names, "LICENSE") {
		problems = append(problems, fmt.Sprintf("commit %s has no LICENSE: no one may use a module without one, "+
			"and pkg.go.dev shows none of its documentation", commit[:12]))
	}
	return problems, nil
}

// modulePath returns the path of the bulwark module in dir (from the repository root).
func modulePath(dir string) string {
	if dir == "." {
		return rootPath
	}
	return rootPath + "/" + dir
}

// moduleDir returns the directory of the bulwark module with the given path; ok is false for a
// module that is not bulwark's.
func moduleDir(modPath string) (dir string, ok bool) {
	if modPath == rootPath {
		return ".", true
	}
	return strings.CutPrefix(modPath, rootPath+"/")
}

// tagName returns the git tag of the module in dir at version: the version for the root,
// "dir/version" for a nested module.
func tagName(dir, version string) string {
	if dir == "." {
		return version
	}
	return dir + "/" + version
}

// release is the commit or tag a module version is served from.
type release struct {
	rev     string // what git archive reads: a commit or refs/tags/…
	label   string // rev as the reader knows it: HEAD, a tag
	version string
}

// servedModule is one module version in the proxy.
type servedModule struct {
	path, version, from string
}

// proxy is a module proxy in a directory, in the layout GOPROXY=file://DIR reads.
type proxy struct {
	repo   string
	dir    string
	served []servedModule
}

// serve puts every published module at r into the proxy, then every version of a bulwark module
// that a go.mod in the proxy requires, from its tag. It returns, as problems, the versions that
// are required and that no one could serve.
func (p *proxy) serve(ctx context.Context, r release) (problems []string, err error) {
	type job struct {
		dir string
		release
	}
	var queue []job
	for _, dir := range published {
		queue = append(queue, job{dir, r})
	}
	seen := map[string]bool{}
	for len(queue) > 0 {
		j := queue[0]
		queue = queue[1:]
		key := modulePath(j.dir) + "@" + j.version
		if seen[key] {
			continue
		}
		seen[key] = true
		f, err := p.add(ctx, j.dir, j.release)
		if err != nil {
			return nil, err
		}
		for _, req := range f.Require {
			dir, ok := moduleDir(req.Mod.Path)
			if !ok {
				continue
			}
			if req.Mod.Version == r.version && slices.Contains(published, dir) {
				continue // served from r already
			}
			tag := tagName(dir, req.Mod.Version)
			if _, err := git(ctx, p.repo, "rev-parse", "--verify", "--quiet", "refs/tags/"+tag+"^{commit}"); err != nil {
				problems = append(problems, fmt.Sprintf("%s at %s requires %s %s, which is neither the version under test (%s) "+
					"nor a tag (%s): no proxy can serve it, so go get of this module fails",
					path.Join(j.dir, "go.mod"), j.label, req.Mod.Path, req.Mod.Version, r.version, tag))
				continue
			}
			queue = append(queue, job{dir, release{rev: "refs/tags/" + tag, label: tag, version: req.Mod.Version}})
		}
	}
	return problems, nil
}

// add writes the module in dir at r into the proxy (its .mod, .info and .zip, and a line of
// @v/list) and returns its parsed go.mod.
func (p *proxy) add(ctx context.Context, dir string, r release) (*modfile.File, error) {
	gomodName := path.Join(dir, "go.mod")
	data, err := gitOutput(ctx, p.repo, "show", r.rev+":"+gomodName)
	if err != nil {
		return nil, err
	}
	f, err := modfile.ParseLax(gomodName, data, nil)
	if err != nil {
		return nil, err
	}
	m := module.Version{Path: modulePath(dir), Version: r.version}
	if f.Module == nil || f.Module.Mod.Path != m.Path {
		return nil, fmt.Errorf("%s at %s: want module %s", gomodName, r.label, m.Path)
	}
	escPath, err := module.EscapePath(m.Path)
	if err != nil {
		return nil, err
	}
	escVersion, err := module.EscapeVersion(m.Version)
	if err != nil {
		return nil, err
	}
	at := filepath.Join(p.dir, filepath.FromSlash(escPath), "@v")
	if err := os.MkdirAll(at, 0o755); err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(at, escVersion+".mod"), data, 0o644); err != nil {
		return nil, err
	}
	when, err := git(ctx, p.repo, "show", "--no-patch", "--format=%cI", r.rev)
	if err != nil {
		return nil, err
	}
	t, err := time.Parse(time.RFC3339, when)
	if err != nil {
		return nil, err
	}
	info, err := json.Marshal(struct {
		Version string
		Time    time.Time
	}{m.Version, t.UTC()})
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(at, escVersion+".info"), info, 0o644); err != nil {
		return nil, err
	}
	if err := writeZip(ctx, filepath.Join(at, escVersion+".zip"), m, p.repo, r.rev, dir); err != nil {
		return nil, err
	}
	list, err := os.OpenFile(filepath.Join(at, "list"), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return nil, err
	}
	_, err = fmt.Fprintln(list, m.Version)
	if err := errors.Join(err, list.Close()); err != nil {
		return nil, err
	}
	p.served = append(p.served, servedModule{m.Path, m.Version, r.label})
	return f, nil
}

// writeZip writes the module zip of m, the module in dir at rev, to name: the files of dir in
// git archive of rev (golang.org/x/mod/zip leaves out what the go command leaves out), and the
// root LICENSE when dir is a nested module without one, as the go command adds it.
// zip.CreateFromVCS does the same but refuses a linked worktree (git worktree add).
func writeZip(ctx context.Context, name string, m module.Version, repo, rev, dir string) error {
	archive, err := gitOutput(ctx, repo, "-c", "core.autocrlf=input", "-c", "core.eol=lf", "archive", "--format=zip", rev)
	if err != nil {
		return err
	}
	r, err := stdzip.NewReader(bytes.NewReader(archive), int64(len(archive)))
	if err != nil {
		return err
	}
	prefix := ""
	if dir != "." {
		prefix = dir + "/"
	}
	var files []zip.File
	var license zip.File
	haveLicense := false
	for _, f := range r.File {
		if f.Name == "LICENSE" {
			license = archived{f, "LICENSE"}
		}
		rel, ok := strings.CutPrefix(f.Name, prefix)
		if !ok || rel == "" || strings.HasSuffix(rel, "/") {
			continue
		}
		files = append(files, archived{f, rel})
		haveLicense = haveLicense || rel == "LICENSE"
	}
	if !haveLicense && license != nil {
		files = append(files, license)
	}
	out, err := os.Create(name)
	if err != nil {
		return err
	}
	err = zip.Create(out, m, files)
	return errors.Join(err, out.Close())
}

// archived is a file of git archive's zip, at path rel in a module.
type archived struct {
	f   *stdzip.File
	rel string
}

func (a archived) Path() string                 { return a.rel }
func (a archived) Lstat() (fs.FileInfo, error)  { return a.f.FileInfo(), nil }
func (a archived) Open() (io.ReadCloser, error) { return a.f.Open() }

// userEnv returns the environment of a user's go commands: no workspace, no toolchain switch,
// a module cache of its own under tmp (the pretend versions must never reach the real one), and
// a GOPROXY that tries the proxy in proxyDir, then the local module cache, then the proxies in
// force without "direct" (a bulwark version that the file proxy lacks must fail, not be fetched
// from version control). The checksum database is off: it knows no pretend version.
func userEnv(ctx context.Context, tmp, proxyDir string) ([]string, error) {
	out, err := goOutput(ctx, tmp, nil, "env", "GOMODCACHE", "GOPROXY")
	if err != nil {
		return nil, err
	}
	cache, goproxy, _ := strings.Cut(strings.TrimSpace(out), "\n")
	proxies := []string{"file://" + filepath.ToSlash(proxyDir)}
	if download := filepath.Join(cache, "cache", "download"); isDir(download) {
		proxies = append(proxies, "file://"+filepath.ToSlash(download))
	}
	proxies = append(proxies, proxyTail(goproxy))
	set := map[string]string{
		"GOWORK":      "off",
		"GOTOOLCHAIN": "local",
		"GOMODCACHE":  filepath.Join(tmp, "modcache"),
		"GOPROXY":     strings.Join(proxies, ","),
		"GOSUMDB":     "off",
		"GONOSUMDB":   "",
		"GONOPROXY":   "",
		"GOPRIVATE":   "",
		"GOINSECURE":  "",
		// -modcacherw lets the module cache be deleted; -trimpath keeps the build cache's entries
		// for third-party packages valid across module caches in new directories.
		"GOFLAGS": "-modcacherw -trimpath",
	}
	var env []string
	for _, kv := range os.Environ() {
		if k, _, _ := strings.Cut(kv, "="); !hasKey(set, k) {
			env = append(env, kv)
		}
	}
	for k, v := range set {
		env = append(env, k+"="+v)
	}
	return env, nil
}

// hasKey reports whether m has the key k.
func hasKey(m map[string]string, k string) bool {
	_, ok := m[k]
	return ok
}

// proxyTail returns goproxy (a GOPROXY value) without its "direct" entries, joined by commas;
// "off" when nothing is left.
func proxyTail(goproxy string) string {
	var kept []string
	for _, p := range strings.FieldsFunc(goproxy, func(r rune) bool { return r == ',' || r == '|' }) {
		if p != "direct" {
			kept = append(kept, p)
		}
	}
	if len(kept) == 0 {
		return "off"
	}
	return strings.Join(kept, ",")
}

// isDir reports whether name is a directory.
func isDir(name string) bool {
	fi, err := os.Stat(name)
	return err == nil && fi.IsDir()
}

// install does in an empty module under tmp what a user does to use modPath at version: go get,
// a main that imports each of its packages that a user can import, go mod tidy, go build. It
// returns what it did and which bulwark modules the build used.
func install(ctx context.Context, tmp string, env []string, modPath, version string) (string, error) {
	work, err := os.MkdirTemp(tmp, "user-")
	if err != nil {
		return "", err
	}
	run := func(args ...string) (string, error) { return goOutput(ctx, work, env, args...) }
	if _, err := run("mod", "init", "example.com/user"); err != nil {
		return "", err
	}
	if _, err := run("get", modPath+"@"+version); err != nil {
		return "", err
	}
	list, err := run("list", "-mod=mod", "-f", "{{with .Module}}{{.Path}}{{end}} {{.Name}} {{.ImportPath}}", modPath+"/...")
	if err != nil {
		return "", err
	}
	imports := importable(list, modPath)
	if len(imports) == 0 {
		return "", fmt.Errorf("%s@%s: no package that a user can import:\n%s", modPath, version, list)
	}
	var main strings.Builder
	main.WriteString("package main\n\nimport (\n")
	for _, imp := range imports {
		fmt.Fprintf(&main, "\t_ %q\n", imp)
	}
	main.WriteString(")\n\nfunc main() {}\n")
	if err := os.WriteFile(filepath.Join(work, "main.go"), []byte(main.String()), 0o644); err != nil {
		return "", err
	}
	if _, err := run("mod", "tidy"); err != nil {
		return "", err
	}
	if _, err := run("build", "-o", filepath.Join(work, "user"), "."); err != nil {
		return "", err
	}
	mods, err := run("list", "-m", "-f", "{{.Path}} {{.Version}}", "all")
	if err != nil {
		return "", err
	}
	var used []string
	for _, line := range strings.Split(strings.TrimSpace(mods), "\n") {
		p, v, _ := strings.Cut(line, " ")
		if _, ok := moduleDir(p); !ok {
			continue
		}
		if p == modPath && v != version {
			return "", fmt.Errorf("%s: go mod tidy left %s %s, want %s", modPath, p, v, version)
		}
		if p != modPath {
			used = append(used, strings.TrimPrefix(p, "github.com/bulwark-go/")+" "+v)
		}
	}
	with := ""
	if len(used) > 0 {
		with = ", with " + strings.Join(used, ", ")
	}
	return fmt.Sprintf("go get, go mod tidy, go build of a main importing its %d package(s)%s", len(imports), with), nil
}

// importable returns the import paths of the packages in list (lines of "module name path", as
// go list prints them) that module modPath holds and a user can import: no main, no internal.
func importable(list, modPath string) []string {
	var paths []string
	for _, line := range strings.Split(strings.TrimSpace(list), "\n") {
		fields := strings.Fields(line)
		if len(fields) != 3 || fields[0] != modPath || fields[1] == "main" {
			continue
		}
		if strings.Contains(fields[2]+"/", "/internal/") {
			continue
		}
		paths = append(paths, fields[2])
	}
	return paths
}

// git runs git in dir and returns its output without surrounding space.
func git(ctx context.Context, dir string, args ...string) (string, error) {
	out, err := gitOutput(ctx, dir, args...)
	return strings.TrimSpace(string(out)), err
}

// gitOutput runs git in dir and returns its standard output; an error carries its standard error.
func gitOutput(ctx context.Context, dir string, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, "git", args...)
	cmd.Dir = dir
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("git %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return out, nil
}

// goOutput runs the go command in dir with env (nil: the current environment) and returns its
// combined output; an error carries it too.
func goOutput(ctx context.Context, dir string, env []string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = dir
	cmd.Env = env
	out, err := cmd.CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("go %s (in %s): %w\n%s", strings.Join(args, " "), filepath.Base(dir), err, strings.TrimSpace(string(out)))
	}
	return string(out), nil
}
