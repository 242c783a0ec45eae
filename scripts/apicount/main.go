// Command apicount prints how many identifiers each bulwark package exports, counted from the
// syntax tree of its non-test files: exported types, functions, methods, struct fields,
// interface methods, constants and variables. Methods, fields and interface methods count only
// when both they and the type they belong to are exported (an exported method of an unexported
// type is not part of the API), and an embedded field counts once, by its type's name. The last
// column is the target that issue 23 sets for the package, where it sets one.
//
// It reads every directory under the given ones (default: the current directory), nested
// modules included, and skips test files, main packages and anything under internal/ or
// testdata/ (neither is importable by users). scripts/test.sh prints its table; it never fails
// on a count.
//
//	go run ./scripts/apicount [DIR...]
package main

import (
	"cmp"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// targets are the ceilings issue 23 sets on the exported identifiers of a package.
var targets = map[string]int{
	"command": 150,
	"circuit": 100,
}

// count is the exported identifiers of one package, by kind.
type count struct {
	dir                                         string
	types, funcs, methods, fields, consts, vars int
}

func (c count) total() int {
	return c.types + c.funcs + c.methods + c.fields + c.consts + c.vars
}

func main() {
	roots := os.Args[1:]
	if len(roots) == 0 {
		roots = []string{"."}
	}
	var counts []count
	for _, root := range roots {
		found, err := countTree(root)
		if err != nil {
			fmt.Fprintln(os.Stderr, "apicount:", err)
			os.Exit(1)
		}
		counts = append(counts, found...)
	}
	slices.SortFunc(counts, func(a, b count) int {
		return cmp.Or(cmp.Compare(b.total(), a.total()), strings.Compare(a.dir, b.dir))
	})
	width := len("package")
	for _, c := range counts {
		width = max(width, len(c.dir))
	}
	fmt.Printf("%-*s %5s %5s %5s %7s %6s %6s %4s  %s\n",
		width, "package", "total", "types", "funcs", "methods", "fields", "consts", "vars", "target (issue 23)")
	for _, c := range counts {
		target := ""
		if t, ok := targets[c.dir]; ok {
			target = fmt.Sprintf("≤ %d: %s", t, verdict(c.total(), t))
		}
		line := fmt.Sprintf("%-*s %5d %5d %5d %7d %6d %6d %4d  %s",
			width, c.dir, c.total(), c.types, c.funcs, c.methods, c.fields, c.consts, c.vars, target)
		fmt.Println(strings.TrimRight(line, " "))
	}
}

// verdict says how total stands against the ceiling target.
func verdict(total, target int) string {
	if total <= target {
		return "met"
	}
	return fmt.Sprintf("%d over", total-target)
}

// countTree counts every importable package in the directories under root.
func countTree(root string) ([]count, error) {
	var counts []count
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			return nil
		}
		name := d.Name()
		if path != root && (name == "internal" || name == "testdata" || name == "vendor" ||
			strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_")) {
			return filepath.SkipDir
		}
		c, ok, err := countDir(path)
		if err != nil {
			return err
		}
		if ok {
			rel, err := filepath.Rel(root, path)
			if err != nil {
				return err
			}
			c.dir = filepath.ToSlash(rel)
			counts = append(counts, c)
		}
		return nil
	})
	return counts, err
}

// countDir counts the package in dir; ok is false when dir holds no package a user can import
// (no non-test Go file, or package main).
func countDir(dir string) (c count, ok bool, err error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return c, false, err
	}
	fset := token.NewFileSet()
	pkg := ""
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() || !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, filepath.Join(dir, name), nil, parser.SkipObjectResolution)
		if err != nil {
			return c, false, err
		}
		if pkg != "" && f.Name.Name != pkg {
			return c, false, fmt.Errorf("%s: packages %s and %s in the non-test files", dir, pkg, f.Name.Name)
		}
		pkg = f.Name.Name
		c.add(f)
	}
	return c, pkg != "" && pkg != "main", nil
}

// add counts the exported identifiers that f declares.
func (c *count) add(f *ast.File) {
	for _, decl := range f.Decls {
		switch d := decl.(type) {
		case *ast.FuncDecl:
			if !d.Name.IsExported() {
				continue
			}
			if d.Recv == nil {
				c.funcs++
			} else if ast.IsExported(receiverType(d.Recv.List[0].Type)) {
				c.methods++
			}
		case *ast.GenDecl:
			for _, spec := range d.Specs {
				c.addSpec(d.Tok, spec)
			}
		}
	}
}

// addSpec counts one type, const or var spec.
func (c *count) addSpec(tok token.Token, spec ast.Spec) {
	switch s := spec.(type) {
	case *ast.TypeSpec:
		if !s.Name.IsExported() {
			return
		}
		c.types++
		switch t := s.Type.(type) {
		case *ast.StructType:
			c.fields += exportedFields(t.Fields)
		case *ast.InterfaceType:
			c.methods += exportedFields(t.Methods)
		}
	case *ast.ValueSpec:
		for _, name := range s.Names {
			if !name.IsExported() {
				continue
			}
			if tok == token.CONST {
				c.consts++
			} else {
				c.vars++
			}
		}
	}
}

// exportedFields counts the exported names in a struct's fields or an interface's methods; an
// embedded field or interface counts by its type's name (so an embedded interface counts as one
// name, not as the methods it brings).
func exportedFields(list *ast.FieldList) int {
	n := 0
	for _, field := range list.List {
		if len(field.Names) == 0 {
			if ast.IsExported(receiverType(field.Type)) {
				n++
			}
			continue
		}
		for _, name := range field.Names {
			if name.IsExported() {
				n++
			}
		}
	}
	return n
}

// receiverType returns the name of the type that expr names, without pointer, package qualifier
// or type arguments: "Breaker" for *Breaker, Group[T] and circuit.Breaker.
func receiverType(expr ast.Expr) string {
	for {
		switch e := expr.(type) {
		case *ast.StarExpr:
			expr = e.X
		case *ast.IndexExpr:
			expr = e.X
		case *ast.IndexListExpr:
			expr = e.X
		case *ast.SelectorExpr:
			return e.Sel.Name
		case *ast.Ident:
			return e.Name
		default:
			return ""
		}
	}
}
