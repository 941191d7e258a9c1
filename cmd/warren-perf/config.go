package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
)

const defaultURI = "amqp://guest:guest@127.0.0.1:5672/"

// Config is the parsed and validated command line.
type Config struct {
	URIs []string
	// ConsumerURIs, when given, are where consumers connect instead of
	// URIs: a producer on one node and a consumer on another.
	ConsumerURIs      []string
	BatchWrites       bool
	Producers         int
	Consumers         int
	Size              int
	Confirm           int
	Prefetch          int
	AutoAck           bool
	MultiAck          int
	Queue             string
	Queues            int
	QueueType         string
	QueueArgs         []QueueArg // in command-line order; for a repeated key the last wins
	Predeclared       bool
	Delete            bool
	Transient         bool
	TransientMessages bool
	Mandatory         bool
	Rate              float64
	Duration          time.Duration // 0 = until --messages is reached or interrupted
	Messages          int64
	Drain             time.Duration
	JSONOnly          bool
}

// QueueArg is one --queue-arg key=value with its typed value.
type QueueArg struct {
	Key   string
	Value any
}

// QueueNames lists the queues in use: NAME when --queues is 1, else NAME-1..NAME-N.
func (c *Config) QueueNames() []string {
	if c.Queues <= 1 {
		return []string{c.Queue}
	}
	names := make([]string, c.Queues)
	for i := range names {
		names[i] = fmt.Sprintf("%s-%d", c.Queue, i+1)
	}
	return names
}

// DeclareArgs is the argument table for queue.declare.
func (c *Config) DeclareArgs() amqp.Table {
	t := amqp.Table{"x-queue-type": c.QueueType}
	for _, a := range c.QueueArgs {
		t[a.Key] = a.Value
	}
	return t
}

// Durable reports whether queues are declared durable (validate allows --transient only for
// classic queues: quorum queues must be durable).
func (c *Config) Durable() bool { return !c.Transient }

const usageHeader = `warren-perf: AMQP 0-9-1 load generator for Warren (and any RabbitMQ-compatible broker).

Producers publish --size byte messages to the default exchange with routing key = queue name;
consumers on the same queues measure end-to-end latency from a send timestamp in the body.
Every second a progress line is printed; at the end, totals, average rates, latency
percentiles and one machine-readable line starting with {"summary": (grep '^{"summary"').

Usage:
  warren-perf [flags]

Examples:
  warren-perf --uri amqp://guest:guest@127.0.0.1:5672/ --producers 2 --consumers 2 --confirm 100
  warren-perf --queue-type quorum --queues 3 --producers 3 --consumers 3 --rate 30000 --duration 1m
  warren-perf --uri amqp://h1:5672/,amqp://h2:5672/ --queue-arg x-max-length=100000 --delete

Flags (-flag and --flag are equivalent; --flag=value or --flag value):
`

const usageFooter = `
Notes:
  Connections: one per producer and per consumer. Producer i uses URI i mod len(URIs) and queue
  i mod --queues; consumers are spread the same way. Queue k is declared through URI k mod
  len(URIs), so in a cluster its leader lands on that node.
  Latency: the body's first 8 bytes carry the send time (ns, big-endian; a header when --size < 8).
  Consumers ignore ("stale") messages sent before this run started, e.g. left over from an earlier
  run, unless the run has no producers. The send rate is averaged over the publishing phase; the
  confirm and receive rates from the start to the last confirm / delivery (so a slow drain shows).
  Stopping: producers stop after --duration (or --messages); consumers stop once every sent
  message is received or --drain has passed. Ctrl-C stops at once and still prints the summary;
  a second Ctrl-C exits immediately.
  Exit status: 0 ok, 1 connection/broker error, 2 bad flags.
`

// flagGroups orders --help by topic instead of alphabetically.
var flagGroups = []struct {
	title string
	names []string
}{
	{"Connection", []string{"uri", "consumer-uri", "batch-writes"}},
	{"Workload", []string{"producers", "consumers", "size", "rate", "duration", "messages", "drain"}},
	{"Publishing", []string{"confirm", "transient-messages", "mandatory"}},
	{"Consuming", []string{"prefetch", "auto-ack", "multi-ack"}},
	{"Queues", []string{"queue", "queues", "queue-type", "queue-arg", "predeclared", "transient", "delete"}},
	{"Output", []string{"json-only"}},
}

// printUsage prints the grouped help. Every defined flag must appear in flagGroups (the
// config test checks it), so a new flag cannot silently vanish from --help.
func printUsage(out io.Writer, fs *flag.FlagSet) {
	var b strings.Builder
	b.WriteString(usageHeader)
	for _, g := range flagGroups {
		fmt.Fprintf(&b, "\n%s:\n", g.title)
		for _, name := range g.names {
			f := fs.Lookup(name)
			arg, usage := flag.UnquoteUsage(f)
			head := "  --" + name
			if arg != "" {
				head += " " + arg
			}
			usage = strings.ReplaceAll(usage, "\n", "\n      ")
			fmt.Fprintf(&b, "%s\n      %s", head, usage)
			if d := f.DefValue; d != "" && d != "0" && d != "false" && d != "0s" {
				fmt.Fprintf(&b, " (default %s)", d)
			}
			b.WriteString("\n")
		}
	}
	b.WriteString(usageFooter)
	fmt.Fprint(out, b.String())
}

// parseConfig parses command-line arguments (without the program name). Usage and flag
// errors are written to out; flag.ErrHelp is returned for -h/--help.
func parseConfig(args []string, out io.Writer) (*Config, error) {
	c := &Config{}
	fs := newFlagSet(c, out)
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		err := fmt.Errorf("unexpected argument %q (all options are flags; see --help)", fs.Arg(0))
		fmt.Fprintln(out, "warren-perf:", err)
		return nil, err
	}
	durationSet := false
	fs.Visit(func(f *flag.Flag) { durationSet = durationSet || f.Name == "duration" })
	if c.Messages > 0 && !durationSet {
		c.Duration = 0
	}
	if len(c.URIs) == 0 {
		c.URIs = []string{defaultURI}
	}
	if err := c.validate(); err != nil {
		fmt.Fprintln(out, "warren-perf:", err)
		return nil, err
	}
	return c, nil
}

// newFlagSet defines every flag, bound to c.
func newFlagSet(c *Config, out io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("warren-perf", flag.ContinueOnError)
	fs.SetOutput(out)
	fs.Usage = func() { printUsage(out, fs) }

	fs.Func("uri", "broker `URI`; repeat the flag or give a comma-separated list to spread producers\nand consumers round-robin over several nodes (default "+defaultURI+")", func(s string) error {
		for u := range strings.SplitSeq(s, ",") {
			if u = strings.TrimSpace(u); u != "" {
				c.URIs = append(c.URIs, u)
			}
		}
		return nil
	})
	fs.Func("consumer-uri", "broker `URI` for consumers only (repeatable or comma-separated); default: the --uri list.\nIn a cluster, --uri A --consumer-uri B publishes on node A and consumes on node B", func(s string) error {
		for u := range strings.SplitSeq(s, ",") {
			if u = strings.TrimSpace(u); u != "" {
				c.ConsumerURIs = append(c.ConsumerURIs, u)
			}
		}
		return nil
	})
	fs.BoolVar(&c.BatchWrites, "batch-writes", true, "gather each connection's writes into as few socket writes as the load allows, and read\nthrough a 64 KiB buffer, so the tool takes less of a shared machine's CPU (false: one write\nper publish and per ack, as amqp091-go does on its own)")
	fs.IntVar(&c.Producers, "producers", 1, "run `N` producers, each with its own connection")
	fs.IntVar(&c.Consumers, "consumers", 1, "run `N` consumers, each with its own connection")
	fs.IntVar(&c.Size, "size", 1000, "message body size in `BYTES`")
	fs.IntVar(&c.Confirm, "confirm", 0, "publisher-confirm window: at most `N` unconfirmed messages in flight per producer\n(0 = no publisher confirms)")
	fs.IntVar(&c.Prefetch, "prefetch", 100, "consumer prefetch: at most `N` unacked messages per consumer (basic.qos); 0 = unlimited.\n100 keeps a loopback/LAN pipe full without letting one consumer hoard the queue\n(ignored with --auto-ack)")
	fs.BoolVar(&c.AutoAck, "auto-ack", false, "consume in no-ack mode (the broker considers messages acknowledged on delivery)")
	fs.IntVar(&c.MultiAck, "multi-ack", 1, "with manual acks, acknowledge every `N`th message with multiple=true\n(1 = ack each message; must not exceed --prefetch)")
	fs.StringVar(&c.Queue, "queue", "warren-perf", "queue `NAME` (with --queues N > 1: NAME-1 .. NAME-N)")
	fs.IntVar(&c.Queues, "queues", 1, "use `N` queues; producers and consumers are spread round-robin over them")
	fs.StringVar(&c.QueueType, "queue-type", "classic", "queue `TYPE`: classic or quorum (sets x-queue-type)")
	fs.Func("queue-arg", "extra queue.declare argument `KEY=VALUE`, repeatable; VALUE is sent as an integer if it\nparses as one, as a boolean if it is true/false, else as a string (e.g. x-max-length=100000)", func(s string) error {
		a, err := parseQueueArg(s)
		if err == nil {
			c.QueueArgs = append(c.QueueArgs, a)
		}
		return err
	})
	fs.BoolVar(&c.Predeclared, "predeclared", false, "do not declare the queues, only check that they exist")
	fs.BoolVar(&c.Delete, "delete", false, "delete the queues at the end of the run")
	fs.BoolVar(&c.Transient, "transient", false, "declare non-durable queues (classic queues only)")
	fs.BoolVar(&c.TransientMessages, "transient-messages", false, "publish with delivery mode 1 (default: persistent, delivery mode 2)")
	fs.BoolVar(&c.Mandatory, "mandatory", true, "publish with mandatory=true and count basic.return (unroutable) messages")
	fs.Float64Var(&c.Rate, "rate", 0, "total publish rate limit of `N` msg/s, shared by all producers (0 = unlimited)")
	fs.DurationVar(&c.Duration, "duration", 10*time.Second, "publish for `D` (e.g. 30s, 5m); 0 = until --messages or Ctrl-C.\nIf --messages is given without --duration, there is no time limit")
	fs.Int64Var(&c.Messages, "messages", 0, "stop each producer after `N` messages (0 = no cap)")
	fs.DurationVar(&c.Drain, "drain", 5*time.Second, "after producers stop, wait up to `D` for outstanding confirms and for\nconsumers to receive everything that was sent")
	fs.BoolVar(&c.JSONOnly, "json-only", false, "print only the final {\"summary\":...} line on stdout (no progress or human report)")

	return fs
}

// parseQueueArg parses KEY=VALUE into a typed queue argument.
func parseQueueArg(s string) (QueueArg, error) {
	k, v, ok := strings.Cut(s, "=")
	k = strings.TrimSpace(k)
	if !ok || k == "" {
		return QueueArg{}, fmt.Errorf("queue argument %q is not KEY=VALUE", s)
	}
	if n, err := strconv.ParseInt(v, 10, 64); err == nil {
		return QueueArg{k, n}, nil
	}
	// RabbitMQ rejects a string where it expects a boolean (x-single-active-consumer), and
	// nobody needs the literal strings "true"/"false" as queue arguments.
	if v == "true" || v == "false" {
		return QueueArg{k, v == "true"}, nil
	}
	return QueueArg{k, v}, nil
}

func (c *Config) validate() error {
	for _, u := range append(slices.Clone(c.URIs), c.ConsumerURIs...) {
		if _, err := amqp.ParseURI(u); err != nil {
			return fmt.Errorf("bad --uri %q: %v", redactURI(u), err)
		}
	}
	var errs []error
	check := func(ok bool, format string, a ...any) {
		if !ok {
			errs = append(errs, fmt.Errorf(format, a...))
		}
	}
	check(c.Producers >= 0, "--producers must be >= 0")
	check(c.Consumers >= 0, "--consumers must be >= 0")
	check(c.Producers+c.Consumers > 0, "nothing to do: --producers and --consumers are both 0")
	check(c.Size >= 0, "--size must be >= 0")
	check(c.Confirm >= 0, "--confirm must be >= 0")
	check(c.Prefetch >= 0 && c.Prefetch <= 65535, "--prefetch must be 0..65535 (basic.qos is 16-bit)")
	check(c.MultiAck >= 1, "--multi-ack must be >= 1")
	// Acking every N with a prefetch below N would wait for deliveries the broker never sends.
	check(c.AutoAck || c.Prefetch == 0 || c.MultiAck <= c.Prefetch,
		"--multi-ack %d exceeds --prefetch %d: consumers would stall", c.MultiAck, c.Prefetch)
	check(c.Queue != "", "--queue must not be empty")
	check(c.Queues >= 1, "--queues must be >= 1")
	check(c.QueueType == "classic" || c.QueueType == "quorum", "--queue-type must be classic or quorum, not %q", c.QueueType)
	check(!c.Transient || c.QueueType == "classic", "--transient needs --queue-type classic (quorum queues are always durable)")
	for _, a := range c.QueueArgs {
		check(a.Key != "x-queue-type", "set the queue type with --queue-type, not --queue-arg x-queue-type")
	}
	check(c.Rate >= 0, "--rate must be >= 0")
	check(c.Duration >= 0, "--duration must be >= 0")
	check(c.Messages >= 0, "--messages must be >= 0")
	check(c.Drain >= 0, "--drain must be >= 0")
	check(c.Producers > 0 || c.Messages == 0, "--messages needs producers")
	return errors.Join(errs...)
}

// redactURI hides the password so URIs can be printed and put in the summary.
func redactURI(s string) string {
	u, err := url.Parse(s)
	if err != nil || u.User == nil {
		return s
	}
	if _, has := u.User.Password(); has {
		u.User = url.UserPassword(u.User.Username(), "xxx")
		return strings.Replace(u.String(), ":xxx@", ":***@", 1)
	}
	return s
}
