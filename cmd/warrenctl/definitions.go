package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/warrenmq/warren/proto/adminpb"
)

// Definitions, as rabbitmqctl export_definitions and import_definitions.

var definitionCommands = []*command{
	{
		name:    "export definitions",
		args:    []string{"FILE"},
		summary: "write the cluster's definitions to FILE (- for stdout)",
		help: `Writes the cluster's definitions to FILE ("-" for standard output) as
RabbitMQ's definitions document (JSON), as rabbitmqctl export_definitions:
users with their password hashes, vhosts, permissions, policies (operator
policies among the parameters), durable queues, exchanges and bindings.
'warrenctl import definitions' and RabbitMQ's import_definitions read it. It
holds password hashes: keep it as you would keep them.`,
		setup: exportDefinitions,
	},
	{
		name:    "import definitions",
		args:    []string{"FILE"},
		summary: "add what a definitions document (RabbitMQ's or Warren's) defines",
		help: `Adds what the definitions document in FILE ("-" for standard input) defines, as
rabbitmqctl import_definitions: a document exported from RabbitMQ (rabbitmqctl
export_definitions, or the management UI) or from Warren. Users (with their
password hashes), vhosts, permissions, policies, operator policies, durable
queues, exchanges and bindings are created, or updated where they exist;
nothing the document lacks is removed. An item Warren cannot take is listed
and the rest imported: a password hashed otherwise than with SHA-256, a
stream, a redeclaration that is not equivalent, a parameter of a plugin
(federation, shovel). Exit status 1 if anything was not imported.`,
		setup:   importDefinitions,
		timeout: 10 * time.Minute,
	},
}

func init() { commands = append(commands, definitionCommands...) }

// stdinReader is what "-" reads; a variable for tests.
var stdinReader io.Reader = os.Stdin

type exportReport struct {
	File  string `json:"file"`
	Bytes int    `json:"bytes"`
	doc   []byte
}

func exportDefinitions(*flag.FlagSet) body {
	return func(ctx context.Context, c adminpb.AdminClient, args []string) (report, error) {
		resp, err := c.ExportDefinitions(ctx, &adminpb.ExportDefinitionsRequest{})
		if err != nil {
			return nil, err
		}
		r := &exportReport{File: args[0], Bytes: len(resp.Json)}
		if args[0] == "-" {
			r.doc = resp.Json
			return r, nil
		}
		if err := os.WriteFile(args[0], append(resp.Json, '\n'), 0o600); err != nil {
			return nil, fmt.Errorf("write %s: %w", args[0], err)
		}
		return r, nil
	}
}

// MarshalJSON is the document itself when it goes to standard output.
func (r *exportReport) MarshalJSON() ([]byte, error) {
	if r.doc != nil {
		return r.doc, nil
	}
	return json.Marshal(struct {
		File  string `json:"file"`
		Bytes int    `json:"bytes"`
	}{r.File, r.Bytes})
}

func (r *exportReport) writeText(w io.Writer) {
	if r.doc != nil {
		fmt.Fprintf(w, "%s\n", r.doc)
		return
	}
	fmt.Fprintf(w, "Exported the definitions to %s (%d bytes).\n", r.File, r.Bytes)
}

type importReport struct {
	Imported map[string]uint32 `json:"imported"`
	Problems []string          `json:"problems"`
}

func importDefinitions(*flag.FlagSet) body {
	return func(ctx context.Context, c adminpb.AdminClient, args []string) (report, error) {
		var doc []byte
		var err error
		if args[0] == "-" {
			doc, err = io.ReadAll(stdinReader)
		} else {
			doc, err = os.ReadFile(args[0])
		}
		if err != nil {
			return nil, fmt.Errorf("read the definitions: %w", err)
		}
		resp, err := c.ImportDefinitions(ctx, &adminpb.DefinitionsDocument{Json: doc})
		if err != nil {
			return nil, err
		}
		r := &importReport{Imported: resp.Imported, Problems: resp.Problems}
		if r.Imported == nil {
			r.Imported = map[string]uint32{}
		}
		if r.Problems == nil {
			r.Problems = []string{}
		}
		return r, nil
	}
}

func (r *importReport) failed() bool { return len(r.Problems) > 0 }

func (r *importReport) writeText(w io.Writer) {
	var parts []string
	for _, k := range []string{"users", "vhosts", "permissions", "policies", "operator policies", "exchanges", "queues", "bindings"} {
		if n := r.Imported[k]; n > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", n, k))
		}
	}
	if len(parts) == 0 {
		parts = []string{"nothing"}
	}
	fmt.Fprintf(w, "Imported %s.\n", strings.Join(parts, ", "))
	if len(r.Problems) > 0 {
		fmt.Fprintf(w, "Not imported (%d):\n", len(r.Problems))
		for _, p := range slices.Sorted(slices.Values(r.Problems)) {
			fmt.Fprintf(w, "  %s\n", p)
		}
	}
}
