// Command warrenctl is the operator's tool for a Warren cluster. It talks
// to the admin service (proto/adminpb) on any node's internal gRPC address;
// that node answers for the whole cluster. Run it with --help for the
// commands.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/warrenmq/warren/proto/adminpb"
)

// Exit statuses.
const (
	exitOK      = 0
	exitFailure = 1 // the command ran and failed: node unreachable, queue not found
	exitUsage   = 2 // the command line is wrong
)

// Defaults of the global flags; defaultNode is node 0's internal address
// in `make cluster`.
const (
	defaultNode    = "127.0.0.1:25672"
	defaultTimeout = 5 * time.Second
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// globals are the flags every command takes, before or after its words.
type globals struct {
	node    string
	timeout time.Duration
	json    bool
	creds   credentials // auth.go
}

// defaultGlobals are the global flags' defaults: each from its
// $WARRENCTL_* variable if set.
func defaultGlobals() *globals {
	g := &globals{node: defaultNode, timeout: defaultTimeout}
	if v := os.Getenv("WARRENCTL_NODE"); v != "" {
		g.node = v
	}
	g.creds = credentialsFromEnv(os.Getenv)
	return g
}

// define adds the global flags to fs with the current values as defaults,
// so that a second flag set keeps what the first one parsed.
func (g *globals) define(fs *flag.FlagSet) {
	fs.StringVar(&g.node, "node", g.node, "internal gRPC address of the node to ask, as `host:port` (default $WARRENCTL_NODE, else "+defaultNode+")")
	fs.DurationVar(&g.timeout, "timeout", g.timeout, "give up on the command after this long")
	fs.BoolVar(&g.json, "json", g.json, "print JSON instead of tables, for scripts")
	g.creds.define(fs)
}

func newFlagSet(name string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard) // errors and help are printed by run
	fs.Usage = func() {}
	return fs
}

// run is warrenctl with its arguments and output streams; it returns the
// exit status.
func run(args []string, stdout, stderr io.Writer) int {
	g := defaultGlobals()
	top := newFlagSet("warrenctl")
	g.define(top)
	if err := top.Parse(args); errors.Is(err, flag.ErrHelp) {
		printUsage(stdout)
		return exitOK
	} else if err != nil {
		return usageError(stderr, "warrenctl --help", err.Error())
	}
	args = top.Args()
	if len(args) == 0 {
		printUsage(stderr)
		return exitUsage
	}
	if args[0] == "help" {
		if len(args) == 1 {
			printUsage(stdout)
			return exitOK
		}
		if cmd, _ := lookup(args[1:]); cmd != nil {
			cmd.printHelp(stdout)
			return exitOK
		}
		return usageError(stderr, "warrenctl --help", fmt.Sprintf("unknown command %q", strings.Join(args[1:], " ")))
	}
	cmd, rest := lookup(args)
	if cmd == nil {
		return unknownCommand(stderr, args)
	}

	fs := newFlagSet(cmd.name)
	body := cmd.setup(fs)
	g.define(fs)
	positional, err := parseInterspersed(fs, rest)
	if errors.Is(err, flag.ErrHelp) {
		cmd.printHelp(stdout)
		return exitOK
	}
	helpHint := "warrenctl " + cmd.name + " --help"
	if err != nil {
		return usageError(stderr, helpHint, err.Error())
	}
	if len(positional) < len(cmd.args) {
		return usageError(stderr, helpHint, fmt.Sprintf("%s needs %s", cmd.name, strings.Join(cmd.args[len(positional):], " ")))
	}
	if most := len(cmd.args) + len(cmd.optional); len(positional) > most {
		return usageError(stderr, helpHint, fmt.Sprintf("unexpected arguments: %s", strings.Join(positional[most:], " ")))
	}
	if cmd.timeout > 0 && !isSet(top, "timeout") && !isSet(fs, "timeout") {
		g.timeout = cmd.timeout
	}
	if g.timeout <= 0 {
		return usageError(stderr, helpHint, "--timeout must be positive")
	}

	ctx, cancel := context.WithTimeout(context.Background(), g.timeout)
	defer cancel()
	var client adminpb.AdminClient
	if !cmd.offline {
		opts, err := g.creds.dialOptions()
		if err != nil {
			return usageError(stderr, helpHint, err.Error())
		}
		conn, err := grpc.NewClient(g.node, opts...)
		if err != nil {
			return usageError(stderr, helpHint, fmt.Sprintf("--node %q: %v", g.node, err))
		}
		defer conn.Close()
		client = adminpb.NewAdminClient(conn)
	}
	out, err := body(ctx, client, positional)
	if err != nil {
		fmt.Fprintln(stderr, "warrenctl:", explain(err, g))
		return exitFailure
	}
	if g.json {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(out); err != nil {
			fmt.Fprintln(stderr, "warrenctl:", err)
			return exitFailure
		}
		if f, ok := out.(failing); ok && f.failed() {
			return exitFailure
		}
		return exitOK
	}
	out.writeText(stdout)
	if f, ok := out.(failing); ok && f.failed() {
		return exitFailure
	}
	return exitOK
}

// failing is a report that can say the command failed, with the report
// printed all the same: a health check that found problems.
type failing interface {
	failed() bool
}

// parseInterspersed parses flags that may come before, between or after
// the positional arguments, which it returns.
func parseInterspersed(fs *flag.FlagSet, args []string) ([]string, error) {
	var positional []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		args = fs.Args()
		if len(args) == 0 {
			return positional, nil
		}
		if args[0] == "--" {
			return append(positional, args[1:]...), nil
		}
		positional = append(positional, args[0])
		args = args[1:]
	}
}

// isSet reports whether flag name was given on fs's command line.
func isSet(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}

// explain turns a failed call into a sentence for the operator.
func explain(err error, g *globals) string {
	s, ok := status.FromError(err)
	if !ok {
		return err.Error()
	}
	switch s.Code() {
	case codes.Unavailable:
		return fmt.Sprintf("cannot reach node %s: %s\n(is it running? warrenctl talks to a cluster member's --internal-addr, or to a standalone node's --admin-addr; --node or WARRENCTL_NODE chooses another node)", g.node, s.Message())
	case codes.DeadlineExceeded:
		return fmt.Sprintf("node %s did not answer within %s (--timeout)", g.node, g.timeout)
	case codes.Unimplemented:
		return fmt.Sprintf("node %s does not know this command (an older version?): %s", g.node, s.Message())
	default:
		return s.Message()
	}
}

func usageError(stderr io.Writer, helpCmd, msg string) int {
	fmt.Fprintf(stderr, "warrenctl: %s\nRun '%s' for usage.\n", msg, helpCmd)
	return exitUsage
}

// unknownCommand says so, listing the commands that begin with the first
// word if there are any.
func unknownCommand(stderr io.Writer, args []string) int {
	var near []string
	for _, c := range commands {
		if strings.Fields(c.name)[0] == args[0] {
			near = append(near, "warrenctl "+c.name)
		}
	}
	if len(near) > 0 {
		return usageError(stderr, "warrenctl --help", fmt.Sprintf("unknown command %q; did you mean: %s", strings.Join(args, " "), strings.Join(near, ", ")))
	}
	return usageError(stderr, "warrenctl --help", fmt.Sprintf("unknown command %q", args[0]))
}
