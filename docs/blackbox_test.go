package docs

import (
	"fmt"
	"sort"
	"strings"
	"testing"
)

// blackBoxViolations returns one line for each import by the harness
// (jepsen and its own packages, jepsen/...) of a Warren package other
// than proto/... and the harness's own: its tools, such as the file
// system that loses unsynced writes, are held to the same line.
func blackBoxViolations(graph map[string][]string) []string {
	var bad []string
	for pkg, imports := range graph {
		if pkg != "jepsen" && !strings.HasPrefix(pkg, "jepsen/") {
			continue
		}
		for _, imp := range imports {
			if !strings.HasPrefix(imp, "proto/") && !strings.HasPrefix(imp, "jepsen/") {
				bad = append(bad, fmt.Sprintf("%s imports %s: the harness may use only the binaries, AMQP, proto/ and its own jepsen/...", pkg, imp))
			}
		}
	}
	sort.Strings(bad)
	return bad
}

// TestBlackBoxCheckCatchesAnInternalImport proves the check can fail, for
// the harness and for a package of its own.
func TestBlackBoxCheckCatchesAnInternalImport(t *testing.T) {
	graph := map[string][]string{
		"jepsen":         {"proto/adminpb", "jepsen/lazyfs", "jepsen/tool"},
		"jepsen/lazyfs":  {"proto/adminpb"},
		"jepsen/tool":    {"raftq/wal"},
		"jepsenish":      {"raftq"}, // not the harness
		"cluster/broker": {"raftq"},
	}
	got := blackBoxViolations(graph)
	want := []string{"jepsen/tool imports raftq/wal: the harness may use only the binaries, AMQP, proto/ and its own jepsen/..."}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("violations:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	graph["jepsen"] = append(graph["jepsen"], "cluster/node")
	if got := blackBoxViolations(graph); len(got) != 2 || !strings.HasPrefix(got[0], "jepsen imports cluster/node") {
		t.Fatalf("an internal import by jepsen itself: %q", got)
	}
}
