package main

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/warrenmq/warren/raftq/replica"
)

func TestConfigPrecedence(t *testing.T) {
	file := filepath.Join(t.TempDir(), "warren.toml")
	err := os.WriteFile(file, []byte(`
amqp = "127.0.0.1:6000"
heartbeat = "30s"
max-message-size = 1024
connection-max = 100
log-level = "warn"

[[users]]
name = "app"
password = "pw"
[[vhosts]]
name = "orders"
[[permissions]]
user = "app"
vhost = "orders"
configure = ".*"
write = ".*"
read = ".*"
`), 0o600)
	if err != nil {
		t.Fatal(err)
	}
	env := map[string]string{
		"WARREN_CONFIG":    file,
		"WARREN_HEARTBEAT": "20s",
		"WARREN_LOG_LEVEL": "debug",
	}
	c, err := loadConfig([]string{"--log-level", "error"}, func(k string) string { return env[k] }, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if c.amqpAddr != "127.0.0.1:6000" {
		t.Errorf("amqp from file: got %q", c.amqpAddr)
	}
	if c.heartbeat != 20*time.Second {
		t.Errorf("environment should beat the file: heartbeat %v", c.heartbeat)
	}
	if c.logLevel != "error" {
		t.Errorf("flag should beat the environment: log level %q", c.logLevel)
	}
	if c.maxMessageSize != 1024 {
		t.Errorf("max-message-size from file: %d", c.maxMessageSize)
	}
	if c.connectionMax != 100 || c.channelMaxNode != 0 {
		t.Errorf("connection-max from file %d, channel-max-per-node by default %d", c.connectionMax, c.channelMaxNode)
	}
	if c.dataDir != "./data" {
		t.Errorf("default data dir: %q", c.dataDir)
	}
	if len(c.seed.Users) != 1 || c.seed.Users[0].Name != "app" || len(c.seed.Vhosts) != 1 || len(c.seed.Permissions) != 1 {
		t.Errorf("seed from file: %+v", c.seed)
	}
}

func TestConfigRejectsBadValues(t *testing.T) {
	none := func(string) string { return "" }
	for _, args := range [][]string{
		{"--default-queue-type", "stream"},
		{"--frame-max", "100"},
		{"--log-level", "loud"},
		{"--disk-free-limit", "lots"},
		{"--disk-free-limit", "-5MB"},
		{"--memory-high-watermark", "most"},
		{"--publish-linger-batch", "1"},
		{"--publish-linger-batch", "17"},
		{"extra-argument"},
	} {
		if _, err := loadConfig(args, none, io.Discard); err == nil {
			t.Errorf("%v accepted", args)
		}
	}
	file := filepath.Join(t.TempDir(), "bad.toml")
	os.WriteFile(file, []byte("no-such-setting = 1\n"), 0o600)
	if _, err := loadConfig([]string{"--config", file}, none, io.Discard); err == nil {
		t.Error("unknown config file key accepted")
	}
	if _, err := loadConfig(nil, func(k string) string {
		if k == "WARREN_HEARTBEAT" {
			return "soon"
		}
		return ""
	}, io.Discard); err == nil {
		t.Error("bad environment value accepted")
	}
}

func TestDefaultSeedIsGuest(t *testing.T) {
	c, err := loadConfig(nil, func(string) string { return "" }, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if len(c.seed.Users) != 1 || c.seed.Users[0].Name != "guest" || c.seed.Vhosts[0] != "/" {
		t.Fatalf("default seed: %+v", c.seed)
	}
}

func TestConfigWatermarks(t *testing.T) {
	none := func(string) string { return "" }
	c, err := loadConfig(nil, none, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if got := c.nodeConfig(nil).DiskFreeLimit; got != 50_000_000 {
		t.Errorf("default disk free limit %d, want RabbitMQ's 50MB", got)
	}
	c, err = loadConfig([]string{"--disk-free-limit", "2GiB", "--memory-high-watermark", "1GB"}, none, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if nc := c.nodeConfig(nil); nc.DiskFreeLimit != 2<<30 || nc.Broker.MemoryLimit != 1e9 {
		t.Errorf("disk free limit %d, memory limit %d", nc.DiskFreeLimit, nc.Broker.MemoryLimit)
	}
}

func TestConfigPayloadCache(t *testing.T) {
	env := map[string]string{}
	getenv := func(k string) string { return env[k] }
	for _, tc := range []struct {
		args []string
		env  string
		want int64
	}{
		{nil, "", replica.DefaultPayloadCache},
		{[]string{"--queue-payload-cache", "1GiB"}, "", 1 << 30},
		{nil, "64MB", 64e6},
		{[]string{"--queue-payload-cache", "0"}, "64MB", 0},
	} {
		env["WARREN_QUEUE_PAYLOAD_CACHE"] = tc.env
		c, err := loadConfig(tc.args, getenv, io.Discard)
		if err != nil {
			t.Fatalf("%v %q: %v", tc.args, tc.env, err)
		}
		if got := c.nodeConfig(nil).Broker.Replica.Payloads.Limit(); got != tc.want {
			t.Errorf("%v %q: payload cache %d, want %d", tc.args, tc.env, got, tc.want)
		}
	}
	env["WARREN_QUEUE_PAYLOAD_CACHE"] = "plenty"
	if _, err := loadConfig(nil, getenv, io.Discard); err == nil || !strings.Contains(err.Error(), "queue-payload-cache") {
		t.Errorf("a bad payload cache: %v", err)
	}
}

// TestConfigGlobalQos: basic.qos global is denied by default, as RabbitMQ
// 4.3 denies its deprecated global_qos; permit restores the shared limit.
func TestConfigGlobalQos(t *testing.T) {
	env := map[string]string{}
	getenv := func(k string) string { return env[k] }
	for _, tc := range []struct {
		args []string
		env  string
		want bool
	}{
		{nil, "", false},
		{[]string{"--global-qos", "permit"}, "", true},
		{nil, "permit", true},
		{[]string{"--global-qos", "deny"}, "permit", false},
	} {
		env["WARREN_GLOBAL_QOS"] = tc.env
		c, err := loadConfig(tc.args, getenv, io.Discard)
		if err != nil {
			t.Fatalf("%v %q: %v", tc.args, tc.env, err)
		}
		if got := c.nodeConfig(nil).Server.PermitGlobalQos; got != tc.want {
			t.Errorf("%v %q: permit global qos %v, want %v", tc.args, tc.env, got, tc.want)
		}
	}
	env["WARREN_GLOBAL_QOS"] = "sometimes"
	if _, err := loadConfig(nil, getenv, io.Discard); err == nil || !strings.Contains(err.Error(), "--global-qos") {
		t.Errorf("a bad --global-qos: %v", err)
	}
}
