package main

import (
	"errors"
	"flag"
	"io"
	"reflect"
	"strings"
	"testing"
	"time"
)

func mustParse(t *testing.T, args ...string) *Config {
	t.Helper()
	c, err := parseConfig(args, io.Discard)
	if err != nil {
		t.Fatalf("parseConfig(%q): %v", args, err)
	}
	return c
}

func TestDefaults(t *testing.T) {
	c := mustParse(t)
	if !reflect.DeepEqual(c.URIs, []string{defaultURI}) {
		t.Errorf("URIs = %q", c.URIs)
	}
	if c.Producers != 1 || c.Consumers != 1 || c.Size != 1000 || c.Confirm != 0 || c.Prefetch != 100 ||
		c.MultiAck != 1 || c.Duration != 10*time.Second || c.Drain != 5*time.Second || !c.Mandatory ||
		c.QueueType != "classic" || !c.Durable() {
		t.Errorf("unexpected defaults: %+v", c)
	}
	if got := c.QueueNames(); !reflect.DeepEqual(got, []string{"warren-perf"}) {
		t.Errorf("QueueNames = %q", got)
	}
}

func TestURIList(t *testing.T) {
	c := mustParse(t, "--uri", "amqp://a:5672/, amqp://b:5672/", "-uri=amqp://c:5672/vh", "--uri", "amqps://d/")
	want := []string{"amqp://a:5672/", "amqp://b:5672/", "amqp://c:5672/vh", "amqps://d/"}
	if !reflect.DeepEqual(c.URIs, want) {
		t.Errorf("URIs = %q, want %q", c.URIs, want)
	}
	for _, bad := range []string{"http://x:5672/", "amqp://h:notaport/"} {
		if _, err := parseConfig([]string{"--uri", bad}, io.Discard); err == nil {
			t.Errorf("--uri %q accepted", bad)
		}
	}
}

func TestQueueArgs(t *testing.T) {
	c := mustParse(t, "--queue-type", "quorum",
		"--queue-arg", "x-max-length=100000",
		"--queue-arg", "x-delivery-limit=-1",
		"--queue-arg", "x-overflow=reject-publish",
		"--queue-arg", "x-single-active-consumer=true",
		"--queue-arg", "x-note=a=b",
		"--queue-arg", "x-big=12345678901234",
		"--queue-arg", "x-float=1.5",
		"--queue-arg", "x-empty=")
	want := map[string]any{
		"x-queue-type":             "quorum",
		"x-max-length":             int64(100000),
		"x-delivery-limit":         int64(-1),
		"x-overflow":               "reject-publish",
		"x-single-active-consumer": true,
		"x-note":                   "a=b",
		"x-big":                    int64(12345678901234),
		"x-float":                  "1.5",
		"x-empty":                  "",
	}
	got := c.DeclareArgs()
	if len(got) != len(want) {
		t.Fatalf("DeclareArgs = %v", got)
	}
	for k, v := range want {
		if !reflect.DeepEqual(got[k], v) {
			t.Errorf("%s = %#v, want %#v", k, got[k], v)
		}
	}
	if err := got.Validate(); err != nil {
		t.Errorf("table not encodable: %v", err)
	}
	for _, bad := range []string{"novalue", "=5", " =x", "x-queue-type=quorum"} {
		if _, err := parseConfig([]string{"--queue-arg", bad}, io.Discard); err == nil {
			t.Errorf("--queue-arg %q accepted", bad)
		}
	}
}

func TestQueueNames(t *testing.T) {
	c := mustParse(t, "--queue", "q", "--queues", "3")
	if got := c.QueueNames(); !reflect.DeepEqual(got, []string{"q-1", "q-2", "q-3"}) {
		t.Errorf("QueueNames = %q", got)
	}
}

func TestValidation(t *testing.T) {
	bad := [][]string{
		{"--queue-type", "stream"},
		{"--queue-type", "quorum", "--transient"},
		{"--multi-ack", "200"}, // > default prefetch 100
		{"--multi-ack", "0"},
		{"--prefetch", "70000"},
		{"--producers", "0", "--consumers", "0"},
		{"--producers", "-1"},
		{"--queues", "0"},
		{"--queue", ""},
		{"--rate", "-5"},
		{"--producers", "0", "--messages", "10"},
		{"stray-argument"},
		{"--no-such-flag"},
	}
	for _, args := range bad {
		if _, err := parseConfig(args, io.Discard); err == nil {
			t.Errorf("%q accepted", args)
		}
	}
	good := [][]string{
		{"--multi-ack", "200", "--auto-ack"},
		{"--multi-ack", "500", "--prefetch", "0"},
		{"--multi-ack", "100"},
		{"--transient"},
		{"--producers", "0"},
		{"--consumers", "0", "--rate", "0.5"},
	}
	for _, args := range good {
		if _, err := parseConfig(args, io.Discard); err != nil {
			t.Errorf("%q rejected: %v", args, err)
		}
	}
}

func TestMessagesWithoutDurationRunsUntilDone(t *testing.T) {
	if c := mustParse(t, "--messages", "1000"); c.Duration != 0 || c.Messages != 1000 {
		t.Errorf("--messages alone: duration %v", c.Duration)
	}
	if c := mustParse(t, "--messages", "1000", "--duration", "3s"); c.Duration != 3*time.Second {
		t.Errorf("--messages with --duration: duration %v", c.Duration)
	}
}

func TestHelpListsEveryFlag(t *testing.T) {
	var out strings.Builder
	if _, err := parseConfig([]string{"--help"}, &out); !errors.Is(err, flag.ErrHelp) {
		t.Fatalf("--help: err = %v", err)
	}
	grouped := map[string]bool{}
	for _, g := range flagGroups {
		for _, name := range g.names {
			grouped[name] = true
		}
	}
	newFlagSet(&Config{}, io.Discard).VisitAll(func(f *flag.Flag) {
		if !grouped[f.Name] {
			t.Errorf("--%s is in no help group", f.Name)
		}
		if !strings.Contains(out.String(), "\n  --"+f.Name) {
			t.Errorf("--help lacks --%s", f.Name)
		}
		delete(grouped, f.Name)
	})
	for name := range grouped {
		t.Errorf("help group lists undefined flag --%s", name)
	}
}

func TestRedactURI(t *testing.T) {
	cases := map[string]string{
		"amqp://guest:secret@h:5672/":  "amqp://guest:***@h:5672/",
		"amqp://guest@h/":              "amqp://guest@h/",
		"amqp://h:5672/vh":             "amqp://h:5672/vh",
		"amqps://u:p%40ss@h:5671/%2Fv": "amqps://u:***@h:5671/%2Fv",
	}
	for in, want := range cases {
		if got := redactURI(in); got != want {
			t.Errorf("redactURI(%q) = %q, want %q", in, got, want)
		}
	}
}
