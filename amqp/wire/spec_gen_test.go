package wire

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/warrenmq/warren/amqp/internal/specgen/gen"
)

// specPath is the spec the generator reads, kept in the repository with its licence.
var specPath = filepath.Join("..", "internal", "specgen", "spec", "amqp-rabbitmq-0.9.1.json")

func readSpec(t *testing.T) []byte {
	t.Helper()
	spec, err := os.ReadFile(specPath)
	if err != nil {
		t.Fatal(err)
	}
	return spec
}

// TestGeneratedCodeIsCurrent fails when spec_gen.go is not what the generator makes of the spec
// today. To fix it, from the repository root:
//
//	go run ./amqp/internal/specgen -spec amqp/internal/specgen/spec/amqp-rabbitmq-0.9.1.json -out amqp/wire/spec_gen.go
func TestGeneratedCodeIsCurrent(t *testing.T) {
	want, err := gen.Generate(readSpec(t))
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile("spec_gen.go")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatal("spec_gen.go is stale: regenerate it (see this test's comment)")
	}
	if !bytes.HasPrefix(got, []byte(gen.Header+"\n")) {
		t.Fatal("spec_gen.go does not start with the generated-code header")
	}
}

// TestEveryMethodInTheSpecIsGenerated cross-checks the generated lookup against the JSON.
func TestEveryMethodInTheSpecIsGenerated(t *testing.T) {
	var spec struct {
		Classes []struct {
			ID      uint16
			Name    string
			Methods []struct {
				ID          uint16
				Name        string
				Synchronous bool
				Content     bool
			}
		}
	}
	if err := json.Unmarshal(readSpec(t), &spec); err != nil {
		t.Fatal(err)
	}
	count := 0
	for _, c := range spec.Classes {
		for _, m := range c.Methods {
			count++
			got := newMethod(c.ID, m.ID)
			if got == nil {
				t.Errorf("%s.%s not generated", c.Name, m.Name)
				continue
			}
			if got.Name() != c.Name+"."+m.Name || got.Synchronous() != m.Synchronous || got.HasContent() != m.Content {
				t.Errorf("%s.%s: generated as %s, synchronous %v, content %v", c.Name, m.Name, got.Name(), got.Synchronous(), got.HasContent())
			}
		}
	}
	if n := len(allMethods()); n != count {
		t.Errorf("%d methods generated, the spec has %d", n, count)
	}
}
