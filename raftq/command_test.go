package raftq

import (
	"bytes"
	"encoding/binary"
	"errors"
	"reflect"
	"testing"
)

// sampleCommands has one command of every op, with every optional field
// both set and unset somewhere.
func sampleCommands() []Command {
	return []Command{
		{Op: OpEnqueue, Now: 1_700_000_000_000, Publisher: 7, Seq: 42, Size: 1024, Priority: 9, HasPriority: true, TTL: 60000, HasTTL: true, Payload: []byte("hello")},
		{Op: OpEnqueue, Now: -5, Payload: []byte{}},
		{Op: OpPublisherDown, Now: 3, Publisher: 1<<64 - 1},
		{Op: OpAttach, Now: 4, Consumer: 12, Prefetch: 250, ConsumerPriority: -3, Exclusive: true, Timeout: 5000, HasTimeout: true},
		{Op: OpAttach, Now: 4, Consumer: 13, ConsumerPriority: 1<<31 - 1},
		{Op: OpAttach, Now: 4, Consumer: 14, Prefetch: 10, Resume: true, LastDelivery: 1 << 40},
		{Op: OpAttach, Now: 4, Consumer: 15, HasTimeout: true, Timeout: 7, Resume: true},
		{Op: OpDetach, Now: 5, Consumer: 12},
		{Op: OpConsumerDown, Now: 6, Consumer: 1 << 60},
		{Op: OpSuspend, Now: 6, Consumer: 1 << 40},
		{Op: OpSettle, Now: 7, Consumer: 12, IDs: []uint64{10, 11, 12, 9, 1<<64 - 1, 3}},
		{Op: OpSettle, Now: 7, Consumer: 12},
		{Op: OpReturn, Now: 8, Consumer: 12, Cause: ReturnTimeout, IDs: []uint64{5}},
		{Op: OpDiscard, Now: 9, Consumer: 12, Cause: ReturnReject, IDs: []uint64{6, 8}},
		{Op: OpPurge, Now: 10},
		{Op: OpGet, Now: 11, Consumer: 99, NoAck: true},
		{Op: OpGet, Now: 11, Consumer: 99},
		{Op: OpTick, Now: 12},
		{Op: OpDeadLetterSettled, Now: 13, IDs: []uint64{100, 50}},
		{Op: OpTouch, Now: 14},
		{Op: OpUpgrade, Now: 14, Version: MachineVersion},
		{Op: OpUpdateConfig, Now: 15, Config: DefaultConfig()},
		{Op: OpUpdateConfig, Now: 16, Config: Config{
			DeliveryLimit: -1, DeadLettering: true, DeadLetterExchange: "dlx", DeadLetterRoutingKey: "dead",
			HasDeadLetterRoutingKey: true, Strategy: AtLeastOnce, MessageTTL: 0, MaxLength: 5,
			MaxLengthBytes: 1 << 40, Overflow: RejectPublish, Expires: 60000, SingleActiveConsumer: true,
			ConsumerTimeout: 0, ConsumerTimeoutSet: true,
		}},
	}
}

func TestCommandRoundTrip(t *testing.T) {
	for _, c := range sampleCommands() {
		var got Command
		if err := Decode(c.Append(nil), &got); err != nil {
			t.Fatalf("%s: %v", c.Op, err)
		}
		if !reflect.DeepEqual(got, c) {
			t.Errorf("%s: decoded %+v, want %+v", c.Op, got, c)
		}
	}
}

// TestOpcodesAreStable pins the opcode numbers: they are in every log ever
// written, so one must never be renumbered; new ones are appended.
func TestOpcodesAreStable(t *testing.T) {
	want := map[Op]uint8{
		OpEnqueue: 1, OpPublisherDown: 2, OpAttach: 3, OpDetach: 4, OpConsumerDown: 5,
		OpSettle: 6, OpReturn: 7, OpDiscard: 8, OpPurge: 9, OpGet: 10, OpTick: 11,
		OpDeadLetterSettled: 12, OpTouch: 13, OpUpdateConfig: 14, OpSuspend: 15,
		OpUpgrade: 16,
	}
	for op, n := range want {
		if uint8(op) != n {
			t.Errorf("%s = %d, was %d", op, uint8(op), n)
		}
	}
	if int(opCount)-1 != len(want) {
		t.Errorf("%d opcodes, this test knows %d: add the new one here", opCount-1, len(want))
	}
	if ReturnNack != 0 || ReturnReject != 1 || ReturnConsumerGone != 2 || ReturnTimeout != 3 {
		t.Error("return causes renumbered")
	}
}

func TestDecodeRefuses(t *testing.T) {
	settle := (&Command{Op: OpSettle, Consumer: 1, IDs: []uint64{1, 2}}).Append(nil)
	attach := (&Command{Op: OpAttach, Consumer: 1}).Append(nil)
	ret := (&Command{Op: OpReturn, Consumer: 1, IDs: []uint64{1}}).Append(nil)
	update := (&Command{Op: OpUpdateConfig, Now: 1, Config: DefaultConfig()}).Append(nil)
	// update is: opcode, Now, configVersion, DeliveryLimit, flags,
	// strategy, overflow, two empty strings, five limits.
	withByte := func(b []byte, i int, v byte) []byte { b = append([]byte{}, b...); b[i] = v; return b }
	for name, b := range map[string][]byte{
		"empty":          nil,
		"opcode 0":       {0, 0},
		"unknown opcode": {byte(opCount), 0},
		"opcode 255":     {255},
		"truncated":      settle[:len(settle)-1],
		"trailing":       append(append([]byte{}, settle...), 0),
		"no time":        {byte(OpTick)},
		"bad flags":      append(attach[:len(attach)-1], 0x80),
		"bad cause":      func() []byte { b := append([]byte{}, ret...); b[3] = 9; return b }(),
		"huge id count":  {byte(OpDeadLetterSettled), 0, 0xff, 0xff, 0xff, 0xff, 0x0f, 1},
		"long varint":    {byte(OpTick), 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01},
		"config version": withByte(update, 2, 2),
		"config flags":   withByte(update, 4, 0x10),
		"strategy":       withByte(update, 5, 2),
		"overflow":       withByte(update, 6, 2),
		"string length":  withByte(update, 7, 0x7f),
		"limit below -1": withByte(update, 9, 3),
		"neg. timeout":   append(update[:len(update)-len(binary.AppendVarint(nil, DefaultConsumerTimeout))], 1),
		"config cut":     update[:len(update)-1],
		// A machine version this build does not apply, or version 1
		// (where every queue starts).
		"newer version": (&Command{Op: OpUpgrade, Version: MachineVersion + 1}).Append(nil),
		"version 1":     (&Command{Op: OpUpgrade, Version: 1}).Append(nil),
	} {
		var c Command
		if err := Decode(b, &c); !errors.Is(err, ErrDecode) {
			t.Errorf("%s: Decode(%x) = %v, want ErrDecode", name, b, err)
		}
	}
}

// TestDecodeReusesIDs: a decoder reading settle after settle allocates
// nothing once its ID slice has grown.
func TestDecodeReusesIDs(t *testing.T) {
	b := (&Command{Op: OpSettle, Consumer: 1, IDs: []uint64{5, 6, 7, 8, 9}}).Append(nil)
	var c Command
	if err := Decode(b, &c); err != nil {
		t.Fatal(err)
	}
	if n := testing.AllocsPerRun(100, func() { _ = Decode(b, &c) }); n != 0 {
		t.Errorf("Decode allocates %.1f times per settle", n)
	}
}

// FuzzDecode: Decode never panics, and what it accepts re-encodes to an
// entry that decodes to the same command.
func FuzzDecode(f *testing.F) {
	for _, c := range sampleCommands() {
		f.Add(c.Append(nil))
	}
	f.Add([]byte{})
	f.Add([]byte{byte(OpSettle), 2, 1, 3, 0x80})
	f.Fuzz(func(t *testing.T, b []byte) {
		var c Command
		if err := Decode(b, &c); err != nil {
			return
		}
		enc := c.Append(nil)
		var again Command
		if err := Decode(enc, &again); err != nil {
			t.Fatalf("re-encoded %+v does not decode: %v", c, err)
		}
		if !reflect.DeepEqual(again, c) {
			t.Fatalf("decode(encode(%+v)) = %+v", c, again)
		}
		if !bytes.Equal(again.Append(nil), enc) {
			t.Fatalf("encoding of %+v is not stable", c)
		}
	})
}
