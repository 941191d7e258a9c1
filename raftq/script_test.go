package raftq

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

var rewrite = flag.Bool("rewrite", false, "rewrite the expected output of testdata/*.txt")

// TestScripts runs the scripts under testdata: each is a RabbitMQ rule
// told as commands and the effects they must produce, in the style of
// etcd-io/raft's interaction tests. A case is a command line, a "----"
// line, and the expected output up to a blank line. With -rewrite the
// files are regenerated from what the machine does; review the diff.
//
// Commands (t=N sets the leader's clock, and stays set for later commands;
// every command is the next log index, starting at 1):
//
//	new [x-arg=value...] [created=T]   a queue with those arguments
//	enqueue [p=P seq=S] [size=N] [priority=N] [ttl=MS]
//	publisher-down p=P
//	attach c=C [prefetch=N] [priority=N] [exclusive] [timeout=MS]
//	detach c=C | down c=C | suspend c=C | upgrade v=N
//	settle c=C m=I,J | return c=C m=I cause=nack|reject|gone|timeout
//	discard c=C m=I [cause=reject|nack]
//	get c=C [noack] | purge | tick | touch | dl-settled m=I,J
//	update [x-arg=value...]            UpdateConfig with those arguments
//	state | live | deadline | pending | config | consumers | version   inspect, changing nothing
//
// After every command the harness checks the invariants and that a
// snapshot restores to a machine that snapshots to the same bytes.
func TestScripts(t *testing.T) {
	files, err := filepath.Glob("testdata/*.txt")
	if err != nil || len(files) == 0 {
		t.Fatalf("no scripts: %v", err)
	}
	for _, f := range files {
		t.Run(strings.TrimSuffix(filepath.Base(f), ".txt"), func(t *testing.T) { runScript(t, f) })
	}
}

func runScript(t *testing.T, path string) {
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(data), "\n")
	var out bytes.Buffer
	s := &script{t: t}
	for i := 0; i < len(lines); i++ {
		line := lines[i]
		if strings.TrimSpace(line) == "" || strings.HasPrefix(line, "#") {
			out.WriteString(line + "\n")
			continue
		}
		if i+1 >= len(lines) || lines[i+1] != "----" {
			t.Fatalf("%s:%d: command without ---- after it", path, i+1)
		}
		var want []string
		j := i + 2
		for ; j < len(lines) && lines[j] != ""; j++ {
			want = append(want, lines[j])
		}
		got := s.run(fmt.Sprintf("%s:%d", path, i+1), line)
		if !*rewrite && !slices.Equal(got, want) {
			t.Errorf("%s:%d: %s\ngot:\n  %s\nwant:\n  %s", path, i+1, line,
				strings.Join(got, "\n  "), strings.Join(want, "\n  "))
		}
		out.WriteString(line + "\n----\n")
		for _, g := range got {
			out.WriteString(g + "\n")
		}
		i = j - 1
	}
	if *rewrite {
		res := strings.TrimRight(out.String(), "\n") + "\n"
		if err := os.WriteFile(path, []byte(res), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

type script struct {
	t     *testing.T
	m     *Machine
	index uint64
	now   int64
}

func (s *script) run(where, line string) []string {
	fields := strings.Fields(line)
	args := map[string]string{}
	var order []string
	for _, f := range fields[1:] {
		k, v, _ := strings.Cut(f, "=")
		args[k] = v
		order = append(order, k)
	}
	num := func(k string, def int64) int64 {
		v, ok := args[k]
		if !ok {
			return def
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			s.t.Fatalf("%s: %s=%q: %v", where, k, v, err)
		}
		return n
	}
	ids := func() []uint64 {
		var out []uint64
		for _, v := range strings.Split(args["m"], ",") {
			n, err := strconv.ParseUint(strings.TrimPrefix(v, "m"), 10, 64)
			if err != nil {
				s.t.Fatalf("%s: m=%q: %v", where, args["m"], err)
			}
			out = append(out, n)
		}
		return out
	}
	cause := func(def ReturnCause) ReturnCause {
		v, ok := args["cause"]
		if !ok {
			return def
		}
		for c := ReturnCause(0); c < causeCount; c++ {
			if c.String() == v {
				return c
			}
		}
		s.t.Fatalf("%s: cause %q", where, v)
		return 0
	}
	s.now = num("t", s.now)
	// The x-arguments of new and update, ParseConfig'd.
	queueConfig := func() (Config, error) {
		qargs := map[string]any{}
		for _, k := range order {
			if !strings.HasPrefix(k, "x-") {
				continue
			}
			v := args[k]
			if n, err := strconv.ParseInt(v, 10, 64); err == nil {
				qargs[k] = n
			} else if b, err := strconv.ParseBool(v); err == nil {
				qargs[k] = b
			} else {
				qargs[k] = v
			}
		}
		return ParseConfig(qargs)
	}
	if fields[0] == "new" {
		cfg, err := queueConfig()
		if err != nil {
			return []string{"error: " + err.Error()}
		}
		s.m, s.index = New(cfg, num("created", s.now)), 0
		return []string{"ok"}
	}
	if s.m == nil {
		s.t.Fatalf("%s: no queue: start with new", where)
	}
	c := Command{Now: s.now, Consumer: ConsumerID(num("c", 0))}
	switch fields[0] {
	case "state":
		return dump(s.m)
	case "live":
		return []string{fmtIDs(s.m.AppendLiveIndexes(nil))}
	case "consumers":
		var out []string
		for _, v := range s.m.AppendConsumers(nil) {
			out = append(out, fmt.Sprintf("c%d %s held=%d prefetch=%d priority=%d exclusive=%t", v.ID, v.Status, v.Held, v.Prefetch, v.Priority, v.Exclusive))
		}
		if len(out) == 0 {
			out = []string{"(none)"}
		}
		return out
	case "pending":
		var out []string
		for _, e := range s.m.AppendPendingDeadLetters(nil) {
			out = append(out, e.String())
		}
		if len(out) == 0 {
			out = []string{"(none)"}
		}
		return out
	case "config":
		return []string{fmtConfig(s.m.Config())}
	case "update":
		cfg, err := queueConfig()
		if err != nil {
			return []string{"error: " + err.Error()}
		}
		c.Op, c.Config = OpUpdateConfig, cfg
	case "version":
		return []string{strconv.FormatUint(uint64(s.m.Version()), 10)}
	case "deadline":
		at, ok := s.m.NextDeadline()
		if !ok {
			return []string{"none"}
		}
		return []string{strconv.FormatInt(at, 10)}
	case "enqueue":
		c.Op = OpEnqueue
		c.Publisher, c.Seq = uint64(num("p", 0)), uint64(num("seq", 0))
		c.Size = uint32(num("size", 0))
		if _, ok := args["priority"]; ok {
			c.HasPriority, c.Priority = true, uint8(num("priority", 0))
		}
		if _, ok := args["ttl"]; ok {
			c.HasTTL, c.TTL = true, num("ttl", 0)
		}
	case "publisher-down":
		c.Op, c.Publisher = OpPublisherDown, uint64(num("p", 0))
	case "attach":
		c.Op = OpAttach
		c.Prefetch = uint32(num("prefetch", 0))
		c.ConsumerPriority = int32(num("priority", 0))
		_, c.Exclusive = args["exclusive"]
		if _, ok := args["timeout"]; ok {
			c.HasTimeout, c.Timeout = true, num("timeout", 0)
		}
		if _, ok := args["resume"]; ok {
			c.Resume, c.LastDelivery = true, uint64(num("resume", 0))
		}
	case "detach":
		c.Op = OpDetach
	case "down":
		c.Op = OpConsumerDown
	case "suspend":
		c.Op = OpSuspend
	case "upgrade":
		c.Op, c.Version = OpUpgrade, uint32(num("v", 0))
	case "settle":
		c.Op, c.IDs = OpSettle, ids()
	case "return":
		c.Op, c.IDs, c.Cause = OpReturn, ids(), cause(ReturnNack)
	case "discard":
		c.Op, c.IDs, c.Cause = OpDiscard, ids(), cause(ReturnReject)
	case "get":
		c.Op = OpGet
		_, c.NoAck = args["noack"]
	case "purge":
		c.Op = OpPurge
	case "tick":
		c.Op = OpTick
	case "touch":
		c.Op = OpTouch
	case "dl-settled":
		c.Op, c.IDs = OpDeadLetterSettled, ids()
	default:
		s.t.Fatalf("%s: unknown command %q", where, fields[0])
	}
	s.index++
	// Go through the encoding, as entries from the log do.
	var dec Command
	if err := Decode(c.Append(nil), &dec); err != nil {
		s.t.Fatalf("%s: %v", where, err)
	}
	effects := s.m.Apply(Meta{Index: s.index}, &dec, nil)
	if err := checkInvariants(s.m); err != nil {
		s.t.Fatalf("%s: after %q: %v", where, line, err)
	}
	snap := s.m.AppendSnapshot(nil)
	r, err := Restore(snap)
	if err != nil {
		s.t.Fatalf("%s: restore: %v", where, err)
	}
	if again := r.AppendSnapshot(nil); !bytes.Equal(snap, again) {
		s.t.Fatalf("%s: a restored machine snapshots differently", where)
	}
	var out []string
	if c.Op == OpEnqueue {
		// The entry's index is the message's ID, if it was stored: it is
		// live now, or an effect names it.
		stored := slices.Contains(s.m.AppendLiveIndexes(nil), s.index)
		for _, e := range effects {
			switch e.Kind {
			case EffectConfirm, EffectReject, EffectOutOfSequence:
			default:
				stored = stored || e.Index == s.index
			}
		}
		if stored {
			out = append(out, fmt.Sprintf("m%d", s.index))
		} else {
			out = append(out, fmt.Sprintf("(m%d not stored)", s.index))
		}
	}
	for _, e := range effects {
		out = append(out, e.String())
	}
	if len(out) == 0 {
		out = append(out, "ok")
	}
	return out
}

// fmtConfig renders the settings that differ from DefaultConfig's.
func fmtConfig(c Config) string {
	d := DefaultConfig()
	var out []string
	lim := func(name string, v, def int64) {
		if v != def {
			out = append(out, fmt.Sprintf("%s=%d", name, v))
		}
	}
	lim("delivery-limit", c.DeliveryLimit, d.DeliveryLimit)
	if c.DeadLettering {
		out = append(out, fmt.Sprintf("dead-letter-exchange=%q", c.DeadLetterExchange))
	}
	if c.HasDeadLetterRoutingKey {
		out = append(out, fmt.Sprintf("dead-letter-routing-key=%q", c.DeadLetterRoutingKey))
	}
	if c.Strategy == AtLeastOnce {
		out = append(out, "at-least-once")
	}
	lim("message-ttl", c.MessageTTL, d.MessageTTL)
	lim("max-length", c.MaxLength, d.MaxLength)
	lim("max-length-bytes", c.MaxLengthBytes, d.MaxLengthBytes)
	if c.Overflow == RejectPublish {
		out = append(out, "reject-publish")
	}
	lim("expires", c.Expires, d.Expires)
	if c.SingleActiveConsumer {
		out = append(out, "single-active-consumer")
	}
	lim("consumer-timeout", c.ConsumerTimeout, d.ConsumerTimeout)
	if c.Retry.Type != RetryDisabled {
		out = append(out, fmt.Sprintf("delayed-retry=%s/%d/%d", c.Retry.Type, c.Retry.Min, c.Retry.Max))
	}
	if len(out) == 0 {
		return "(defaults)"
	}
	return strings.Join(out, " ")
}

func fmtIDs(ids []uint64) string {
	if len(ids) == 0 {
		return "(none)"
	}
	parts := make([]string, len(ids))
	for i, id := range ids {
		parts[i] = "m" + strconv.FormatUint(id, 10)
	}
	return strings.Join(parts, " ")
}

func fmtMsg(x *msg) string {
	s := "m" + strconv.FormatUint(x.index, 10)
	var attrs []string
	if x.priority != defaultPriority {
		attrs = append(attrs, "p"+strconv.Itoa(int(x.priority)))
	}
	if x.delivery > 0 {
		attrs = append(attrs, "dc"+strconv.FormatUint(uint64(x.delivery), 10))
	}
	if x.acquired > 0 {
		attrs = append(attrs, "ac"+strconv.FormatUint(uint64(x.acquired), 10))
	}
	if x.expiry != 0 {
		attrs = append(attrs, "exp"+strconv.FormatInt(x.expiry, 10))
	}
	if len(attrs) > 0 {
		s += "(" + strings.Join(attrs, ",") + ")"
	}
	return s
}

// dump renders where every message is, for the scripts' state command.
func dump(m *Machine) []string {
	var out []string
	var ready []string
	m.ready.each(func(x *msg) { ready = append(ready, fmtMsg(x)) })
	if len(ready) == 0 {
		ready = []string{"(none)"}
	}
	out = append(out, "ready: "+strings.Join(ready, " "))
	if len(m.delayed.q) > 0 {
		var waiting []string
		for _, w := range m.delayed.q {
			waiting = append(waiting, fmt.Sprintf("%s@%d", fmtMsg(&w.x), w.at))
		}
		out = append(out, "delayed: "+strings.Join(waiting, " "))
	}
	for _, c := range m.consumers.sorted() {
		var held []string
		for i := 0; i < c.order.len(); i++ {
			if d := *c.order.at(i); m.checkouts.live(c, d) {
				h := m.checkouts.held[d.index]
				held = append(held, fmtMsg(&h.msg))
			}
		}
		var flags []string
		switch {
		case c.getter:
			flags = append(flags, "get")
		case c.attached:
			flags = append(flags, "attached", fmt.Sprintf("prefetch=%d", c.prefetch))
			if c.priority != 0 {
				flags = append(flags, fmt.Sprintf("priority=%d", c.priority))
			}
		default:
			flags = append(flags, "detached")
		}
		if m.consumers.active == c {
			flags = append(flags, "active")
		}
		if c.quiescing {
			flags = append(flags, "quiescing")
		}
		if c.suspended {
			flags = append(flags, "suspended")
		}
		if len(held) == 0 {
			held = []string{"(none)"}
		}
		out = append(out, fmt.Sprintf("c%d [%s]: %s", c.id, strings.Join(flags, " "), strings.Join(held, " ")))
	}
	if len(m.dead.byIndex) > 0 {
		var dead []string
		for i := 0; i < m.dead.order.len(); i++ {
			if x, ok := m.dead.byIndex[*m.dead.order.at(i)]; ok {
				dead = append(dead, fmtMsg(&x.msg)+" "+x.reason.String())
			}
		}
		out = append(out, "dead-lettered: "+strings.Join(dead, ", "))
	}
	return out
}
