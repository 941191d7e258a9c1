// Package docs holds the tests that keep docs/architecture.md true: the
// layer order it gives is the order the imports follow, every
// package.Function it names exists, and no hand-written type grows past
// what a reader can hold in their head.
package docs

import (
	"bufio"
	"bytes"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
)

const module = "github.com/warrenmq/warren"

// maxMethods is the most methods one hand-written type may declare.
// Generated code and gRPC service implementations (whose method sets the
// .proto files decide) are exempt.
const maxMethods = 40

// layerRow matches a row of the layer table: | 3 | name | `pkg`, `pkg` |.
var layerRow = regexp.MustCompile("^\\|\\s*([0-9]+)\\s*\\|[^|]*\\|(.*)\\|\\s*$")

// backticked finds the `path` items of a table cell.
var backticked = regexp.MustCompile("`([^`]+)`")

// readLayers returns each package's layer from architecture.md's table.
func readLayers(t *testing.T) map[string]int {
	t.Helper()
	f, err := os.Open("architecture.md")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	layers := map[string]int{}
	sc := bufio.NewScanner(f)
	inTable := false
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "## ") {
			inTable = strings.HasPrefix(line, "## Layers")
			continue
		}
		m := layerRow.FindStringSubmatch(line)
		if !inTable || m == nil {
			continue
		}
		n, _ := strconv.Atoi(m[1])
		for _, p := range backticked.FindAllStringSubmatch(m[2], -1) {
			layers[p[1]] = n
		}
	}
	if len(layers) == 0 {
		t.Fatal("architecture.md has no layer table under '## Layers'")
	}
	return layers
}

// layerOf finds pkg's layer: its own row, or the row of the nearest
// parent written as `parent/...` (which covers the parent too).
func layerOf(layers map[string]int, pkg string) (int, bool) {
	if n, ok := layers[pkg]; ok {
		return n, true
	}
	for p := pkg; p != "." && p != "/" && p != ""; p = filepath.Dir(p) {
		if n, ok := layers[p+"/..."]; ok {
			return n, true
		}
	}
	return 0, false
}

// importGraph lists every package of the module with the module
// packages it imports (tests' imports excluded: a test may reach
// anywhere).
func importGraph(t *testing.T) map[string][]string {
	t.Helper()
	cmd := exec.Command("go", "list", "-f", "{{.ImportPath}}{{range .Imports}} {{.}}{{end}}", "./...")
	cmd.Dir = ".."
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, stderr.String())
	}
	graph := map[string][]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		fields := strings.Fields(line)
		pkg := strings.TrimPrefix(strings.TrimPrefix(fields[0], module), "/")
		if pkg == "" {
			pkg = "."
		}
		graph[pkg] = nil
		for _, imp := range fields[1:] {
			if rel, ok := strings.CutPrefix(imp, module+"/"); ok {
				graph[pkg] = append(graph[pkg], rel)
			}
		}
	}
	return graph
}

// layerViolations returns one line for each package missing from the
// layers and each import that points to a higher layer.
func layerViolations(layers map[string]int, graph map[string][]string) []string {
	var bad []string
	for pkg, imports := range graph {
		n, ok := layerOf(layers, pkg)
		if !ok {
			bad = append(bad, fmt.Sprintf("%s is in no layer of architecture.md", pkg))
			continue
		}
		for _, imp := range imports {
			if m, ok := layerOf(layers, imp); ok && m > n {
				bad = append(bad, fmt.Sprintf("%s (layer %d) imports %s (layer %d)", pkg, n, imp, m))
			}
		}
	}
	sort.Strings(bad)
	return bad
}

func TestImportsFollowTheLayers(t *testing.T) {
	for _, v := range layerViolations(readLayers(t), importGraph(t)) {
		t.Error(v)
	}
}

// TestJepsenIsABlackBox keeps the chaos harness a client of what users
// run: the binaries, AMQP and the admin gRPC API, never the internals it
// is meant to judge (blackbox_test.go).
func TestJepsenIsABlackBox(t *testing.T) {
	for _, v := range blackBoxViolations(importGraph(t)) {
		t.Error(v)
	}
}

// TestLayerCheckCatchesAnUpwardImport proves the check above can fail.
func TestLayerCheckCatchesAnUpwardImport(t *testing.T) {
	layers := map[string]int{"amqp/wire": 0, "raftq": 1, "cluster/...": 2}
	graph := map[string][]string{
		"amqp/wire":    {"raftq"},
		"raftq":        {"amqp/wire"},
		"cluster/node": {"raftq", "amqp/wire"},
		"cluster":      nil,
		"raftq/x":      nil, // "raftq" covers only itself
	}
	got := layerViolations(layers, graph)
	want := []string{"amqp/wire (layer 0) imports raftq (layer 1)", "raftq/x is in no layer of architecture.md"}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("violations:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// stop matches a `package/path.Name` or `package/path.Type.Method`
// reference in the prose.
var stop = regexp.MustCompile("`((?:amqp|raftq|cluster|membership|proto|cmd|jepsen)(?:/[a-z0-9_]+)*)\\.([A-Za-z_][A-Za-z0-9_]*)(?:\\.([A-Za-z_][A-Za-z0-9_]*))?(?:\\(\\))?`")

var fileExtensions = map[string]bool{"md": true, "go": true, "proto": true, "sh": true, "json": true, "txt": true}

// declared lists the names a package declares: top-level names, and
// Type.Method for methods and for interface methods.
func declared(t *testing.T, dir string) map[string]bool {
	t.Helper()
	names := map[string]bool{}
	fset := token.NewFileSet()
	pkgs, err := parser.ParseDir(fset, dir, func(fi os.FileInfo) bool {
		return !strings.HasSuffix(fi.Name(), "_test.go")
	}, 0)
	if err != nil {
		t.Fatalf("parse %s: %v", dir, err)
	}
	for _, pkg := range pkgs {
		for _, f := range pkg.Files {
			for _, d := range f.Decls {
				switch d := d.(type) {
				case *ast.FuncDecl:
					if d.Recv == nil {
						names[d.Name.Name] = true
					} else {
						names[receiverName(d.Recv.List[0].Type)+"."+d.Name.Name] = true
					}
				case *ast.GenDecl:
					for _, s := range d.Specs {
						switch s := s.(type) {
						case *ast.TypeSpec:
							names[s.Name.Name] = true
							if it, ok := s.Type.(*ast.InterfaceType); ok {
								for _, m := range it.Methods.List {
									for _, n := range m.Names {
										names[s.Name.Name+"."+n.Name] = true
									}
								}
							}
						case *ast.ValueSpec:
							for _, n := range s.Names {
								names[n.Name] = true
							}
						}
					}
				}
			}
		}
	}
	return names
}

func receiverName(e ast.Expr) string {
	switch e := e.(type) {
	case *ast.StarExpr:
		return receiverName(e.X)
	case *ast.IndexExpr:
		return receiverName(e.X)
	case *ast.IndexListExpr:
		return receiverName(e.X)
	case *ast.Ident:
		return e.Name
	}
	return ""
}

func TestArchitectureNamesExist(t *testing.T) {
	doc, err := os.ReadFile("architecture.md")
	if err != nil {
		t.Fatal(err)
	}
	cache := map[string]map[string]bool{}
	refs := stop.FindAllStringSubmatch(string(doc), -1)
	if len(refs) < 40 {
		t.Fatalf("architecture.md names %d package.Function stops; the request paths should name more", len(refs))
	}
	for _, m := range refs {
		if fileExtensions[m[2]] {
			continue // a file's name, not a package's
		}
		dir := filepath.Join("..", m[1])
		if _, err := os.Stat(dir); err != nil {
			t.Errorf("%s: no package %s", m[0], m[1])
			continue
		}
		names, ok := cache[dir]
		if !ok {
			names = declared(t, dir)
			cache[dir] = names
		}
		name := m[2]
		if m[3] != "" {
			name += "." + m[3]
		}
		if !names[name] {
			t.Errorf("%s: %s declares no %s", m[0], m[1], name)
		}
	}
}

// TestNoTypeCarriesTooMuch counts the methods each hand-written type
// declares.
func TestNoTypeCarriesTooMuch(t *testing.T) {
	counts := map[string]int{}
	exempt := map[string]bool{}
	err := filepath.WalkDir("..", func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == ".git" || d.Name() == "testdata" || d.Name() == "bin" || d.Name() == "data") {
			return filepath.SkipDir
		}
		name := d.Name()
		if d.IsDir() || !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") ||
			strings.HasSuffix(name, ".pb.go") || strings.HasSuffix(name, "_gen.go") {
			return nil
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, 0)
		if err != nil {
			return err
		}
		dir := filepath.Dir(path)
		for _, decl := range f.Decls {
			switch decl := decl.(type) {
			case *ast.FuncDecl:
				if decl.Recv != nil {
					counts[dir+"."+receiverName(decl.Recv.List[0].Type)]++
				}
			case *ast.GenDecl:
				for _, s := range decl.Specs {
					if ts, ok := s.(*ast.TypeSpec); ok && embedsUnimplementedServer(ts) {
						exempt[dir+"."+ts.Name.Name] = true
					}
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for typ, n := range counts {
		if n > maxMethods && !exempt[typ] {
			t.Errorf("%s declares %d methods (at most %d): split it along a seam", strings.TrimPrefix(typ, "../"), n, maxMethods)
		}
	}
}

// embedsUnimplementedServer reports whether a struct embeds a generated
// Unimplemented…Server, the mark of a gRPC service implementation.
func embedsUnimplementedServer(ts *ast.TypeSpec) bool {
	st, ok := ts.Type.(*ast.StructType)
	if !ok {
		return false
	}
	for _, f := range st.Fields.List {
		if len(f.Names) != 0 {
			continue
		}
		if sel, ok := f.Type.(*ast.SelectorExpr); ok && strings.HasPrefix(sel.Sel.Name, "Unimplemented") && strings.HasSuffix(sel.Sel.Name, "Server") {
			return true
		}
	}
	return false
}
