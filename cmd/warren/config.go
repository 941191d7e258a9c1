package main

import (
	"cmp"
	"encoding/base64"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/BurntSushi/toml"

	"github.com/warrenmq/warren/amqp/server"
	"github.com/warrenmq/warren/cluster/alarm"
	"github.com/warrenmq/warren/cluster/broker"
	"github.com/warrenmq/warren/cluster/catalog"
	"github.com/warrenmq/warren/cluster/node"
	"github.com/warrenmq/warren/raftq/linger"
)

// config is the server's settings. Each comes, in order of precedence,
// from a command-line flag, a WARREN_* environment variable, the config
// file, or its default.
type config struct {
	configFile          string
	dataDir             string
	amqpAddr            string
	logLevel            string
	logFormat           string
	heartbeat           time.Duration
	frameMax            uint
	channelMax          uint
	connectionMax       uint
	channelMaxNode      uint
	maxMessageSize      uint64
	handshakeTimeout    time.Duration
	defaultQueueType    string
	loopbackUsers       string
	clusterName         string
	memoryLimit         string
	diskFreeLimit       string
	debugAddr           string
	timerSlack          time.Duration
	adaptiveProcs       bool
	prometheusAddr      string
	managementAddr      string
	transientQueues     string
	masterLocator       string
	globalQos           string
	disconnectedTimeout time.Duration
	payloadCache        string

	// Clustering: a node is a cluster member when --internal-addr is set.
	nodeName        string
	internalAddr    string
	advertiseAddr   string
	gossipAddr      string
	join            string
	bootstrapExpect int
	gossipKey       string
	publishTimeout  time.Duration
	raftTimeout     time.Duration
	queueTimeout    time.Duration
	hibernateAfter  time.Duration
	spareDelay      time.Duration
	publishLinger   time.Duration
	lingerShare     float64
	lingerBatch     int
	deliveryLinger  time.Duration
	// Membership reconciliation and rebalance on rejoin
	// (cluster/node/reconcile.go).
	queueReconcile         bool
	queueReconcileInterval time.Duration
	rebalanceOnRejoin      bool

	security securityFlags // tls.go

	seed broker.Seed
}

// fileConfig is the config file's layout (TOML). Scalar keys are the flag
// names; users, vhosts and permissions seed the node on its first start.
type fileConfig struct {
	Users []struct {
		Name         string   `toml:"name"`
		Password     string   `toml:"password"`
		PasswordHash string   `toml:"password_hash"`
		Tags         []string `toml:"tags"`
	} `toml:"users"`
	Vhosts []struct {
		Name string `toml:"name"`
	} `toml:"vhosts"`
	Permissions []struct {
		User      string `toml:"user"`
		Vhost     string `toml:"vhost"`
		Configure string `toml:"configure"`
		Write     string `toml:"write"`
		Read      string `toml:"read"`
	} `toml:"permissions"`
}

func newFlagSet(c *config, out io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("warren", flag.ContinueOnError)
	fs.SetOutput(out)
	fs.StringVar(&c.configFile, "config", "", "optional TOML config file (keys are these flag names; it may also seed users, vhosts and permissions)")
	fs.StringVar(&c.dataDir, "data-dir", "./data", "directory for the node's data")
	fs.StringVar(&c.amqpAddr, "amqp", ":5672", "AMQP 0-9-1 listen address")
	fs.StringVar(&c.logLevel, "log-level", "info", "log level: debug, info, warn or error")
	fs.StringVar(&c.logFormat, "log-format", "text", "log format: text or json")
	fs.DurationVar(&c.heartbeat, "heartbeat", 60*time.Second, "heartbeat interval offered to clients (0 disables)")
	fs.UintVar(&c.frameMax, "frame-max", 131072, "largest frame size offered to clients, in bytes")
	fs.UintVar(&c.channelMax, "channel-max", 2047, "most channels per connection")
	fs.UintVar(&c.connectionMax, "connection-max", 0, "most client connections this node accepts, one more refused with 530 (RabbitMQ's connection_max); 0 for no limit")
	fs.UintVar(&c.channelMaxNode, "channel-max-per-node", 0, "most channels on this node's client connections, one more closing the connection that opens it with 530 (RabbitMQ's channel_max_per_node); 0 for no limit")
	fs.Uint64Var(&c.maxMessageSize, "max-message-size", 16<<20, "largest message body accepted, in bytes")
	fs.DurationVar(&c.handshakeTimeout, "handshake-timeout", 10*time.Second, "time allowed from TCP accept to connection.open")
	fs.StringVar(&c.defaultQueueType, "default-queue-type", "quorum", "type of durable queues declared without x-queue-type: quorum or classic")
	fs.StringVar(&c.loopbackUsers, "loopback-users", "guest", "comma-separated users that may only connect from loopback addresses")
	fs.StringVar(&c.clusterName, "cluster-name", "warren", "cluster name reported to clients")
	fs.StringVar(&c.globalQos, "global-qos", "deny", "basic.qos with global set: deny (as RabbitMQ 4.3, where the deprecated global_qos is denied: the prefetch is per consumer, as without global) or permit (as RabbitMQ before 4.3: one prefetch shared by the channel's consumers, which quorum queues refuse with 540)")
	fs.StringVar(&c.transientQueues, "transient-queues", "permit", "non-durable, non-exclusive queues: permit (as RabbitMQ before 4.3) or deny (as RabbitMQ 4.3, a 541 connection error)")
	fs.StringVar(&c.masterLocator, "queue-master-locator", "permit", "the deprecated x-queue-master-locator argument and queue-master-locator policy key: permit (as RabbitMQ before 4.3) or deny (as RabbitMQ 4.3: a 541 connection error, a refused policy)")
	fs.DurationVar(&c.disconnectedTimeout, "consumer-disconnected-timeout", node.DefaultDisconnectedTimeout, "how long a quorum queue keeps the messages of a consumer whose node is cut off from the queue's leader, for it to come back and acknowledge them, before they return to the queue (RabbitMQ 4.3's consumer_disconnected_timeout; a queue may set its own with x-consumer-disconnected-timeout or the consumer-disconnected-timeout policy, in milliseconds, the lower of the two applying); a node that restarted or left returns them at once; 0 returns them at once always")
	fs.StringVar(&c.payloadCache, "queue-payload-cache", "256MiB", "memory the node's quorum queue leaders may keep, all together, for the payloads of messages waiting to be delivered, so that delivering one does not read it back from the log (each queue keeps at most 4 MiB of it): an amount (256MiB, 1GiB, 268435456); 0 reads every delivery from the log")
	fs.StringVar(&c.managementAddr, "management-addr", "", "if set, serve RabbitMQ's management HTTP API (what rabbitmqadmin and monitoring probes use) on this address (RabbitMQ's port is 15672), over HTTPS with the node's certificate when it has TLS material; every node answers for the whole cluster (docs/management.md)")
	fs.StringVar(&c.prometheusAddr, "prometheus-addr", "", "if set, serve Prometheus metrics on this address (RabbitMQ's port is 15692) under /metrics (per node) and /metrics/per-object (per queue), with rabbitmq_prometheus's metric names")
	fs.DurationVar(&c.timerSlack, "timer-slack", 5*time.Millisecond, "how late the kernel may end this process's timed sleeps (Linux timer slack, on every thread): the Go runtime's monitor thread sleeps 20µs at a time while the broker is busy, and at 1,000 msg/s on three nodes 1ms took a quarter off the CPU per message and 5ms a tenth more, at the same latency; network and disk wake-ups are not delayed. Setting it on threads other than the first needs CAP_SYS_NICE (root); 0 leaves the kernel's (50µs)")
	fs.BoolVar(&c.adaptiveProcs, "adaptive-procs", true, fmt.Sprintf("run the Go scheduler on one processor while the node uses little CPU (below %g cores for %v) and on all of them from the first %v in which it uses %g cores: at low load, idle processors woken to look for work cost CPU and mostly find none; ignored when the GOMAXPROCS environment variable is set", procsDownAt, procsDownAfter*procsInterval, procsInterval, procsUpAt))
	fs.StringVar(&c.debugAddr, "debug-addr", "", "if set, serve Go's pprof profiles on this address (e.g. 127.0.0.1:6060) under /debug/pprof/")
	fs.StringVar(&c.memoryLimit, "memory-high-watermark", "0.4", "memory the node may use before publishers across the cluster are blocked (RabbitMQ's vm_memory_high_watermark): a fraction of the memory available, RAM or the cgroup's limit if lower (0.4), or an amount (1073741824, 1GiB); 0 disables")
	fs.StringVar(&c.diskFreeLimit, "disk-free-limit", "50MB", "free space of the data directory's file system below which publishers across the cluster are blocked (RabbitMQ's disk_free_limit): an amount (50MB, 2GiB) or mem_relative:F (F times RAM); 0 disables")
	fs.StringVar(&c.nodeName, "node-name", "", "this node's name in the cluster, stable across restarts (default warren@<hostname>)")
	fs.StringVar(&c.internalAddr, "internal-addr", "", "cluster traffic (Raft, forwarding, warrenctl) listen address, e.g. :25672; setting it makes the node a cluster member")
	fs.StringVar(&c.advertiseAddr, "advertise-addr", "", "internal address the other nodes use to reach this one (default: --internal-addr)")
	fs.StringVar(&c.gossipAddr, "gossip-addr", "127.0.0.1:7946", "gossip (membership and failure detection) address, TCP and UDP")
	fs.StringVar(&c.join, "join", "", "comma-separated gossip addresses (host:port) or DNS names of other nodes to join")
	fs.IntVar(&c.bootstrapExpect, "bootstrap-expect", 0, "form a new cluster once this many nodes see each other (all nodes of a new cluster get the same value; 0 joins an existing cluster; without --join a node forms a cluster of one)")
	fs.StringVar(&c.gossipKey, "gossip-key", "", "base64 key (16, 24 or 32 bytes) encrypting gossip; every node needs the same")
	fs.DurationVar(&c.publishTimeout, "publish-timeout", 30*time.Second, "how long a publish may wait for a quorum queue's majority before the publisher gets basic.nack")
	fs.DurationVar(&c.raftTimeout, "raft-timeout", time.Second, "heartbeat and election timeout of the metadata Raft group: how soon its lost leader is replaced")
	fs.DurationVar(&c.queueTimeout, "queue-raft-timeout", 30*time.Second, "heartbeat and election timeout of the quorum queue groups. A leader whose node gossip declares failed is replaced at once, and after a whole-cluster restart each queue elects as soon as a majority of its members is back, so this bounds only failures gossip does not see: followers cut off from a leader whose node still answers gossip elect after one to two timeouts, and a leader cut off from its followers keeps the role (confirming nothing) for one. Shorter costs idle CPU, since idle leaders heartbeat each follower every tenth to seven tenths of it (1,000 idle queues on a 3-node cluster took 3% of one core in all at 30s, 11% at 10s, on a 2-core test machine)")
	fs.DurationVar(&c.publishLinger, "publish-linger", 2*time.Millisecond, "the longest a quorum queue's leader may hold a publish that arrives within the hold of the one before it, so that the publishes of that moment share one log write, one sync on each member and one AppendEntries, while --publish-linger-share allows it: held 2ms, at 1,000 msg/s to one queue the cluster used about a third less CPU per message, and confirms came about 1.5-2ms later. A publisher that waits for each confirm, or for a small window of them, brings no company: three holds in a row that gained nothing stop the holding for a second. 16 held publishes go at once. 0 sends every publish at once")
	fs.Float64Var(&c.lingerShare, "publish-linger-share", 0.5, "a quorum queue's leader holds publishes (--publish-linger) only while the hold is at most this share of its commit p99 over the last second, and for at most this share of it: where commits are quick (a fast disk, a quiet machine) a hold would be most of the confirm tail and only --publish-linger-batch's is; where they are slow the tail hides it (with 2ms and 0.5, holds start at a p99 of 4ms and stop below 3ms). 0: the whole --publish-linger, whatever the commits take")
	fs.IntVar(&c.lingerBatch, "publish-linger-batch", 3, "while commits are too quick for --publish-linger-share's hold, a quorum queue's leader still holds publishes (up to --publish-linger), but only until this many are held, so that a steady stream shares log writes, syncs and AppendEntries: at 1,000 msg/s to one queue, 3 took about a fifth off the CPU per message and put confirms about 1ms later (p99 0.35-0.4ms later); 2 (a publish waits at most for the next one) took 8% off, confirms 0.1ms later. 0: nothing held while commits are quick")
	fs.DurationVar(&c.deliveryLinger, "delivery-linger", 4*time.Millisecond, "how long a quorum queue's leader may hold a delivery to a consumer on another node that follows another within this, so that the deliveries of that moment go to that node in one message: at 1,000 msg/s the cluster uses about a tenth less CPU per message, and such a consumer gets a message about 3ms later. A consumer whose prefetch is nearly used up brings no company: three holds in a row that gained nothing stop the holding for a second. 16 held deliveries go at once; consumers on the leader's node are never held. 0 sends every delivery at once")
	fs.DurationVar(&c.spareDelay, "spare-follower-delay", 10*time.Millisecond, "how long a quorum queue's leader may hold new entries for the followers its commits do not need (in a group of three, one of the two, chosen per queue so that the syncs spread over the nodes), so that each stores several entries with one write and sync: at 1,000 msg/s that follower syncs about 100 times a second instead of 1,000, and the cluster uses about a fifth less CPU per message (5ms: 12-19%). No commit waits for it while the others answer; when one fails or leaves a request unanswered for twice this (at least 20ms), a spare takes its place, commits waiting at most this much longer meanwhile. 0 sends every entry to every follower at once")
	fs.DurationVar(&c.hibernateAfter, "queue-hibernate-after", 5*time.Second, "close the Raft group of a quorum queue that is empty, has no consumer and has stored nothing for this long, on every member, until a client, an operator command or a member needs it again (it then elects its previous leader, within milliseconds when every member is up). A closed group costs no CPU and a few KB; 0 keeps every group running")
	fs.BoolVar(&c.queueReconcile, "queue-reconcile", true, "grow quorum queues with a target size (x-quorum-target-group-size, policy target-group-size) back to it on alive nodes, as RabbitMQ's continuous membership reconciliation")
	fs.DurationVar(&c.queueReconcileInterval, "queue-reconcile-interval", 60*time.Minute, "time between queue membership reconciliation rounds (one also runs 10s after a node joins, leaves or returns)")
	c.security.define(fs)
	fs.BoolVar(&c.rebalanceOnRejoin, "rebalance-on-rejoin", true, "rebalance quorum queue leaders (as warrenctl rebalance) shortly after a node rejoins the cluster")
	fs.Usage = func() {
		fmt.Fprintf(out, `Usage: warren [flags]

Warren is a RabbitMQ-compatible AMQP 0-9-1 broker with replicated quorum queues.

Every flag can also be set as an environment variable WARREN_<FLAG> (upper
case, dashes as underscores: --data-dir is WARREN_DATA_DIR) or as a key in the
--config file. Flags beat the environment, which beats the file.

Flags:
`)
		fs.PrintDefaults()
	}
	return fs
}

// envName is the environment variable for a flag.
func envName(flagName string) string {
	return "WARREN_" + strings.ToUpper(strings.ReplaceAll(flagName, "-", "_"))
}

// loadConfig parses args, the environment and the config file.
func loadConfig(args []string, getenv func(string) string, out io.Writer) (*config, error) {
	c := &config{}
	fs := newFlagSet(c, out)
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected arguments: %v", fs.Args())
	}
	explicit := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { explicit[f.Name] = true })

	if !explicit["config"] {
		if v := getenv(envName("config")); v != "" {
			c.configFile = v
		}
	}
	fileValues := map[string]any{}
	var file fileConfig
	if c.configFile != "" {
		if _, err := toml.DecodeFile(c.configFile, &fileValues); err != nil {
			return nil, fmt.Errorf("read config file %s: %w", c.configFile, err)
		}
		if _, err := toml.DecodeFile(c.configFile, &file); err != nil {
			return nil, fmt.Errorf("read config file %s: %w", c.configFile, err)
		}
	}
	var errs []error
	fs.VisitAll(func(f *flag.Flag) {
		if explicit[f.Name] || f.Name == "config" {
			return
		}
		if v := getenv(envName(f.Name)); v != "" {
			if err := fs.Set(f.Name, v); err != nil {
				errs = append(errs, fmt.Errorf("%s=%q: %w", envName(f.Name), v, err))
			}
			return
		}
		if v, ok := fileValues[f.Name]; ok {
			if err := fs.Set(f.Name, fmt.Sprint(v)); err != nil {
				errs = append(errs, fmt.Errorf("config file key %s=%v: %w", f.Name, v, err))
			}
		}
	})
	for k, v := range fileValues {
		switch v.(type) {
		case []map[string]any:
			continue // seed tables
		}
		if fs.Lookup(k) == nil && k != "users" && k != "vhosts" && k != "permissions" {
			errs = append(errs, fmt.Errorf("config file: unknown key %q", k))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	c.seed = seedFrom(file)
	return c, c.validate()
}

func seedFrom(f fileConfig) broker.Seed {
	if len(f.Users) == 0 && len(f.Vhosts) == 0 && len(f.Permissions) == 0 {
		return broker.DefaultSeed()
	}
	var s broker.Seed
	for _, u := range f.Users {
		s.Users = append(s.Users, broker.SeedUser{Name: u.Name, Password: u.Password, PasswordHash: u.PasswordHash, Tags: u.Tags})
	}
	for _, v := range f.Vhosts {
		s.Vhosts = append(s.Vhosts, v.Name)
	}
	for _, p := range f.Permissions {
		s.Permissions = append(s.Permissions, catalog.Permission{User: p.User, Vhost: p.Vhost, Configure: p.Configure, Write: p.Write, Read: p.Read})
	}
	return s
}

func (c *config) validate() error {
	switch c.defaultQueueType {
	case broker.QueueTypeQuorum, broker.QueueTypeClassic:
	default:
		return fmt.Errorf("--default-queue-type must be quorum or classic, not %q", c.defaultQueueType)
	}
	if c.queueReconcileInterval <= 0 {
		return fmt.Errorf("--queue-reconcile-interval must be positive, not %s", c.queueReconcileInterval)
	}
	if c.frameMax < 4096 || c.frameMax > 1<<31 {
		return fmt.Errorf("--frame-max must be between 4096 and 2^31, not %d", c.frameMax)
	}
	if c.channelMax == 0 || c.channelMax > 65535 {
		return fmt.Errorf("--channel-max must be between 1 and 65535, not %d", c.channelMax)
	}
	if c.heartbeat < 0 || c.heartbeat > 65535*time.Second {
		return fmt.Errorf("--heartbeat must be between 0 and 65535s")
	}
	if _, err := parseLevel(c.logLevel); err != nil {
		return err
	}
	if c.disconnectedTimeout < 0 {
		return fmt.Errorf("--consumer-disconnected-timeout must not be negative, not %v", c.disconnectedTimeout)
	}
	if c.transientQueues != "permit" && c.transientQueues != "deny" {
		return fmt.Errorf("--transient-queues must be permit or deny, not %q", c.transientQueues)
	}
	if c.masterLocator != "permit" && c.masterLocator != "deny" {
		return fmt.Errorf("--queue-master-locator must be permit or deny, not %q", c.masterLocator)
	}
	if c.globalQos != "permit" && c.globalQos != "deny" {
		return fmt.Errorf("--global-qos must be permit or deny, not %q", c.globalQos)
	}
	if _, err := alarm.ParseMemoryLimit(c.memoryLimit); err != nil {
		return fmt.Errorf("--memory-high-watermark: %w", err)
	}
	if _, err := alarm.ParseAmount(c.payloadCache); err != nil {
		return fmt.Errorf("--queue-payload-cache is an amount (256MiB, 1GiB, 268435456), not %q", c.payloadCache)
	}
	if _, err := alarm.ParseDiskFreeLimit(c.diskFreeLimit); err != nil {
		return fmt.Errorf("--disk-free-limit: %w", err)
	}
	if _, err := c.gossipKeyBytes(); err != nil {
		return err
	}
	if c.raftTimeout < 10*time.Millisecond {
		return fmt.Errorf("--raft-timeout must be at least 10ms")
	}
	if c.queueTimeout < 10*time.Millisecond {
		return fmt.Errorf("--queue-raft-timeout must be at least 10ms")
	}
	if c.publishLinger < 0 {
		return fmt.Errorf("--publish-linger must not be negative")
	}
	if c.lingerShare < 0 || c.lingerShare > 1 {
		return fmt.Errorf("--publish-linger-share must be between 0 and 1")
	}
	if c.lingerBatch != 0 && (c.lingerBatch < 2 || c.lingerBatch > linger.Batch) {
		return fmt.Errorf("--publish-linger-batch must be 0 or between 2 and %d", linger.Batch)
	}
	if c.deliveryLinger < 0 {
		return fmt.Errorf("--delivery-linger must not be negative")
	}
	if c.spareDelay < 0 {
		return fmt.Errorf("--spare-follower-delay must not be negative")
	}
	if c.hibernateAfter < 0 {
		return fmt.Errorf("--queue-hibernate-after must not be negative")
	}
	if c.bootstrapExpect < 0 {
		return fmt.Errorf("--bootstrap-expect must not be negative")
	}
	if c.logFormat != "text" && c.logFormat != "json" {
		return fmt.Errorf("--log-format must be text or json, not %q", c.logFormat)
	}
	return c.security.validate(c)
}

func parseLevel(s string) (slog.Level, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(s)); err != nil {
		return 0, fmt.Errorf("--log-level: %w", err)
	}
	return l, nil
}

func (c *config) logger(w io.Writer) *slog.Logger {
	level, _ := parseLevel(c.logLevel)
	opts := &slog.HandlerOptions{Level: level}
	if c.logFormat == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}

func (c *config) nodeConfig(log *slog.Logger) node.Config {
	var loopback []string
	for _, u := range strings.Split(c.loopbackUsers, ",") {
		if u = strings.TrimSpace(u); u != "" {
			loopback = append(loopback, u)
		}
	}
	if loopback == nil {
		loopback = []string{}
	}
	limit, _ := alarm.ParseMemoryLimit(c.memoryLimit)
	diskLimit, _ := alarm.ParseDiskFreeLimit(c.diskFreeLimit)
	payloads, _ := alarm.ParseAmount(c.payloadCache)
	var cluster *node.ClusterConfig
	if c.internalAddr != "" {
		name := c.nodeName
		if name == "" {
			host, _ := os.Hostname()
			name = "warren@" + host
		}
		key, _ := c.gossipKeyBytes()
		var join []string
		for _, j := range strings.Split(c.join, ",") {
			if j = strings.TrimSpace(j); j != "" {
				join = append(join, j)
			}
		}
		cluster = &node.ClusterConfig{
			NodeName: name, InternalAddr: c.internalAddr, AdvertiseAddr: c.advertiseAddr,
			GossipAddr: c.gossipAddr, Join: join, BootstrapExpect: c.bootstrapExpect,
			GossipKey: key, Version: version, PublishTimeout: c.publishTimeout,
			HeartbeatTimeout: c.raftTimeout, ElectionTimeout: c.raftTimeout,
			QueueTimeout: c.queueTimeout, HibernateAfter: c.hibernateAfter,
			SpareFollowerDelay: cmp.Or(c.spareDelay, -1), // 0 on the command line: off
			DeliveryLinger:     cmp.Or(c.deliveryLinger, -1),
			NoQueueReconcile:   !c.queueReconcile, ReconcileInterval: c.queueReconcileInterval,
			NoRebalanceOnRejoin: !c.rebalanceOnRejoin,
		}
	}
	nc := node.Config{
		Cluster:       cluster,
		DataDir:       c.dataDir,
		AMQPAddr:      c.amqpAddr,
		DiskFreeLimit: diskLimit,
		PayloadCache:  cmp.Or(payloads, -1), // 0 on the command line: none
		Log:           log,
		Server: server.Config{
			ChannelMax:        uint16(c.channelMax),
			FrameMax:          uint32(c.frameMax),
			Heartbeat:         c.heartbeat,
			HandshakeTimeout:  c.handshakeTimeout,
			MaxMessageSize:    c.maxMessageSize,
			ClusterName:       c.clusterName,
			ConnectionMax:     int(c.connectionMax),
			ChannelMaxPerNode: int(c.channelMaxNode),
			PermitGlobalQos:   c.globalQos == "permit",
		},
		Broker: broker.Config{
			LoopbackUsers:               loopback,
			DefaultQueueType:            c.defaultQueueType,
			Seed:                        c.seed,
			MemoryLimit:                 limit,
			DenyTransientQueues:         c.transientQueues == "deny",
			DenyQueueMasterLocator:      c.masterLocator == "deny",
			ConsumerDisconnectedTimeout: c.disconnectedTimeout,
		},
	}
	// The replicas' tuning travels through the broker untouched.
	nc.Broker.Replica.PublishLinger = c.publishLinger
	nc.Broker.Replica.PublishLingerShare = c.lingerShare
	nc.Broker.Replica.PublishLingerBatch = c.lingerBatch
	return nc
}

// gossipKeyBytes decodes --gossip-key.
func (c *config) gossipKeyBytes() ([]byte, error) {
	if c.gossipKey == "" {
		return nil, nil
	}
	k, err := base64.StdEncoding.DecodeString(c.gossipKey)
	if err != nil || (len(k) != 16 && len(k) != 24 && len(k) != 32) {
		return nil, fmt.Errorf("--gossip-key must be base64 of 16, 24 or 32 bytes")
	}
	return k, nil
}
