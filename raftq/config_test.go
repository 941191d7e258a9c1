package raftq

import (
	"errors"
	"testing"
)

func TestParseConfig(t *testing.T) {
	cfg, err := ParseConfig(map[string]any{
		"x-delivery-limit":          int32(5),
		"x-dead-letter-exchange":    "dlx",
		"x-dead-letter-routing-key": "dead",
		"x-dead-letter-strategy":    "at-least-once",
		"x-overflow":                "reject-publish",
		"x-max-length":              uint16(10),
		"x-max-length-bytes":        int64(1 << 20),
		"x-message-ttl":             int8(0),
		"x-expires":                 uint32(60000),
		"x-single-active-consumer":  true,
		"x-consumer-timeout":        int64(1000),
		"x-queue-type":              "quorum",
		"x-unknown":                 []byte("ignored"),
	})
	if err != nil {
		t.Fatal(err)
	}
	want := Config{
		DeliveryLimit: 5, DeadLettering: true, DeadLetterExchange: "dlx",
		DeadLetterRoutingKey: "dead", HasDeadLetterRoutingKey: true, Strategy: AtLeastOnce,
		MessageTTL: 0, MaxLength: 10, MaxLengthBytes: 1 << 20, Overflow: RejectPublish,
		Expires: 60000, SingleActiveConsumer: true, ConsumerTimeout: 1000, ConsumerTimeoutSet: true,
	}
	if cfg != want {
		t.Fatalf("ParseConfig = %+v\nwant %+v", cfg, want)
	}
	if d, _ := ParseConfig(nil); d != DefaultConfig() || d.DeliveryLimit != 20 || d.ConsumerTimeout != 1_800_000 {
		t.Fatalf("defaults %+v", d)
	}
}

// TestParseConfigStrategyFallback: at-least-once needs reject-publish and a
// dead-letter exchange (rabbit_quorum_queue:dlh/5).
func TestParseConfigStrategyFallback(t *testing.T) {
	for _, args := range []map[string]any{
		{"x-dead-letter-exchange": "dlx", "x-dead-letter-strategy": "at-least-once"},
		{"x-dead-letter-strategy": "at-least-once", "x-overflow": "reject-publish"},
		{"x-dead-letter-exchange": "dlx", "x-dead-letter-strategy": "at-least-once", "x-overflow": "reject-publish-dlx"},
	} {
		cfg, err := ParseConfig(args)
		if err != nil || cfg.Strategy != AtMostOnce {
			t.Errorf("%v: strategy %v, err %v", args, cfg.Strategy, err)
		}
	}
}

func TestParseConfigErrors(t *testing.T) {
	for _, tc := range []struct {
		args   map[string]any
		key    string
		detail string
	}{
		{map[string]any{"x-expires": int32(0)}, "x-expires", "{value_zero,0}"},
		{map[string]any{"x-expires": 1.5}, "x-expires", `"expected integer, got double"`},
		{map[string]any{"x-message-ttl": int64(-1)}, "x-message-ttl", "{value_negative,-1}"},
		{map[string]any{"x-dead-letter-exchange": int32(1)}, "x-dead-letter-exchange", "{unacceptable_type,signedint}"},
		{map[string]any{"x-dead-letter-routing-key": "k"}, "x-dead-letter-routing-key", "routing_key_but_no_dlx_defined"},
		{map[string]any{"x-dead-letter-strategy": true}, "x-dead-letter-strategy", "{unacceptable_type,bool}"},
		{map[string]any{"x-max-length-bytes": "1"}, "x-max-length-bytes", `"expected integer, got longstr"`},
		{map[string]any{"x-overflow": []byte("drop-head")}, "x-overflow", "{unacceptable_type,binary}"},
		{map[string]any{"x-single-active-consumer": int8(1)}, "x-single-active-consumer", "{unacceptable_type,byte}"},
		{map[string]any{"x-consumer-disconnected-timeout": int64(-5)}, "x-consumer-disconnected-timeout", "{value_negative,-5}"},
		{map[string]any{"x-consumer-disconnected-timeout": "60s"}, "x-consumer-disconnected-timeout", `"expected integer, got longstr"`},
		// The first failing argument in RabbitMQ's order is reported.
		{map[string]any{"x-consumer-disconnected-timeout": int64(-1), "x-consumer-timeout": int64(-2)}, "x-consumer-timeout", "{value_negative,-2}"},
		{map[string]any{"x-consumer-timeout": int64(-1), "x-expires": int64(-1)}, "x-expires", "{value_negative,-1}"},
	} {
		_, err := ParseConfig(tc.args)
		var ae *ArgError
		if !errors.As(err, &ae) || ae.Key != tc.key || ae.Detail != tc.detail {
			t.Errorf("%v: error %v, want %s %s", tc.args, err, tc.key, tc.detail)
		}
	}
	err := &ArgError{"x-expires", "{value_zero,0}"}
	if got, want := err.For("queue 'q' in vhost '/'"), "invalid arg 'x-expires' for queue 'q' in vhost '/': {value_zero,0}"; got != want {
		t.Errorf("For = %q, want %q", got, want)
	}
}
