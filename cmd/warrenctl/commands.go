package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/warrenmq/warren/proto/adminpb"
)

// command is one entry of warrenctl's command table. A new operator
// command is a new entry here and a function defining it.
type command struct {
	name string   // the words that select it: "quorum status"
	args []string // its positional arguments, by name: QUEUE
	// optional are positional arguments after args that may be left out.
	optional []string
	summary  string // one line, for the command list
	help     string // what it shows or does, for `warrenctl NAME --help`
	// setup defines the command's own flags on fs and returns its body,
	// which runs once they are parsed.
	setup func(fs *flag.FlagSet) body
	// timeout replaces --timeout's default for a command that waits for
	// the cluster to change (zero: the global default).
	timeout time.Duration
	// offline: the command asks no node (its body gets a nil client).
	offline bool
}

// body runs a command against the node's admin service with its
// positional arguments, and returns what to print.
type body func(ctx context.Context, c adminpb.AdminClient, args []string) (report, error)

// report is a command's result. It is printed with writeText, or with
// --json as encoding/json marshals it (its JSON is warrenctl's stable
// output for scripts).
type report interface {
	writeText(w io.Writer)
}

var commands = []*command{
	{
		name:    "cluster status",
		summary: "the nodes, their state and roles, and the metadata leader",
		help: `Lists every node the answering node knows of, from gossip and from the
metadata group: its addresses, version, gossip state (alive, suspect, dead,
left), role in the metadata Raft group (leader, voter, non-voter, none) and
the newest quorum queue machine version its build applies (MACHINE; "-" for
a build from before machine versions).`,
		setup: clusterStatus,
	},
	{
		name:    "list queues",
		summary: "queues with their type, leader, members and message counts",
		help: `Lists the queues of one vhost, or of every vhost, as the answering node's
copy of the metadata has them: type, the node of the leading replica, message
counts (ready and unacknowledged), consumers, and how many of the members'
nodes are alive.`,
		setup: listQueues,
	},
	{
		name:    "quorum status",
		args:    []string{"QUEUE"},
		summary: "each replica of a quorum queue: role, term, log indexes, lag",
		help: `Asks every member of the quorum queue's Raft group for its own view: role
(leader, follower, candidate, non-voter, asleep), term, commit index, applied
index, last log index and the index of its latest snapshot (0: none yet; its
log holds nothing before it but the trailing entries and live messages). LAG
is the leader's commit index minus the member's last log index: entries the
member has yet to receive. MACHINE is the queue machine version the member
has applied: a queue's leader raises it once every member's node applies a
newer one (a rolling upgrade). A member whose node cannot be asked
is shown as unreachable, with the reason below the table.`,
		setup: quorumStatus,
	},
}

// lookup finds the command whose words begin args, the one of most words
// if several do ("grow to-count 3" is not "grow" of node to-count), and
// the arguments after them.
func lookup(args []string) (*command, []string) {
	var found *command
	var n int
	for _, c := range commands {
		words := strings.Fields(c.name)
		if len(words) > n && len(args) >= len(words) && slices.Equal(args[:len(words)], words) {
			found, n = c, len(words)
		}
	}
	if found == nil {
		return nil, nil
	}
	return found, args[n:]
}

func printUsage(w io.Writer) {
	fmt.Fprint(w, `Usage: warrenctl [flags] <command> [arguments]

warrenctl inspects a Warren cluster through the admin service on any node's
internal gRPC address; that node answers for the whole cluster.

Commands:
`)
	tw := tabwriter.NewWriter(w, 0, 0, 3, ' ', 0)
	for _, c := range commands {
		fmt.Fprintf(tw, "  %s\t%s\n", c.synopsis(), c.summary)
	}
	tw.Flush()
	fmt.Fprint(w, "\nFlags (also accepted after the command):\n")
	printFlags(w, globalFlags())
	fmt.Fprint(w, `
Run 'warrenctl <command> --help' for a command's details.
Exit status: 0 success, 1 failure (node unreachable, queue not found, a check
that found problems), 2 usage error.
`)
}

// synopsis is the command's words and arguments: "quorum status QUEUE".
func (c *command) synopsis() string {
	words := append([]string{c.name}, c.args...)
	for _, o := range c.optional {
		words = append(words, "["+o+"]")
	}
	return strings.Join(words, " ")
}

func (c *command) printHelp(w io.Writer) {
	fs := newFlagSet(c.name)
	c.setup(fs)
	fmt.Fprintf(w, "Usage: warrenctl %s [flags]\n\n%s\n", c.synopsis(), c.help)
	if hasFlags(fs) {
		fmt.Fprint(w, "\nFlags:\n")
		printFlags(w, fs)
	}
	fmt.Fprint(w, "\nGlobal flags:\n")
	printFlags(w, globalFlags())
	if c.timeout > 0 {
		fmt.Fprintf(w, "\n--timeout defaults to %s for this command.\n", c.timeout)
	}
}

// globalFlags is a flag set with the global flags and their defaults, for
// help.
func globalFlags() *flag.FlagSet {
	fs := newFlagSet("warrenctl")
	defaultGlobals().define(fs)
	return fs
}

func hasFlags(fs *flag.FlagSet) bool {
	n := 0
	fs.VisitAll(func(*flag.Flag) { n++ })
	return n > 0
}

// printFlags lists fs's flags one a line: "--vhost V   the vhost (default /)".
func printFlags(w io.Writer, fs *flag.FlagSet) {
	tw := tabwriter.NewWriter(w, 0, 0, 3, ' ', 0)
	fs.VisitAll(func(f *flag.Flag) {
		value, usage := flag.UnquoteUsage(f)
		if value != "" {
			value = " " + value
		}
		if f.DefValue != "" && f.DefValue != "false" && !strings.Contains(usage, "(default") {
			usage += fmt.Sprintf(" (default %s)", f.DefValue)
		}
		fmt.Fprintf(tw, "  --%s%s\t%s\n", f.Name, value, usage)
	})
	tw.Flush()
}

// table prints rows under a header, in columns.
func table(w io.Writer, header []string, rows [][]string) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, strings.Join(header, "\t"))
	for _, r := range rows {
		fmt.Fprintln(tw, strings.Join(r, "\t"))
	}
	tw.Flush()
}

// orDash is s, or "-" for nothing.
func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
