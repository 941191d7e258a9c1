package node_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"errors"
	"fmt"
	"github.com/warrenmq/warren/raftq/testwait"
	"io"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/hashicorp/memberlist"
	amqp091 "github.com/rabbitmq/amqp091-go"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	grpccreds "google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/warrenmq/warren/cluster/catalog"
	"github.com/warrenmq/warren/cluster/node/nodetest"
	"github.com/warrenmq/warren/cluster/pki"
	"github.com/warrenmq/warren/proto/adminpb"
	"github.com/warrenmq/warren/proto/metapb"
	"github.com/warrenmq/warren/proto/raftpb"
)

var gossipKey = []byte("0123456789abcdef0123456789abcdef")

// TestSecuredClusterCarriesMessages publishes with confirms over AMQPS
// through one node of a cluster running mutual TLS between its nodes and
// consumes over AMQPS through another: every hop (the clients, forwarding,
// Raft, the metadata group) runs over TLS.
func TestSecuredClusterCarriesMessages(t *testing.T) {
	ca := nodetest.NewCA(t)
	ms := nodetest.StartCluster(t, 3, nodetest.TLS(t, ca, gossipKey))
	pool := x509.NewCertPool()
	caPEM, err := os.ReadFile(filepath.Join(ca, pki.CACertFile))
	if err != nil {
		t.Fatal(err)
	}
	pool.AppendCertsFromPEM(caPEM)
	channel := func(m *nodetest.Member) *amqp091.Channel {
		t.Helper()
		c, err := amqp091.DialTLS(fmt.Sprintf("amqps://guest:guest@%s/", m.AMQPSAddr()), &tls.Config{RootCAs: pool, ServerName: "localhost"})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		ch, err := c.Channel()
		if err != nil {
			t.Fatal(err)
		}
		return ch
	}
	pub := channel(ms[0])
	if _, err := pub.QueueDeclare("secured", true, false, false, false, amqp091.Table{"x-queue-type": "quorum"}); err != nil {
		t.Fatal(err)
	}
	if err := pub.Confirm(false); err != nil {
		t.Fatal(err)
	}
	confirms := pub.NotifyPublish(make(chan amqp091.Confirmation, 100))
	for i := 0; i < 100; i++ {
		if err := pub.PublishWithContext(context.Background(), "", "secured", false, false, amqp091.Publishing{Body: []byte(fmt.Sprint(i))}); err != nil {
			t.Fatal(err)
		}
	}
	for i := 0; i < 100; i++ {
		if c := <-confirms; !c.Ack {
			t.Fatalf("publish %d nacked", c.DeliveryTag)
		}
	}
	sub := channel(ms[1])
	deliveries, err := sub.Consume("secured", "", false, false, false, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 100; i++ {
		select {
		case d := <-deliveries:
			if string(d.Body) != fmt.Sprint(i) {
				t.Fatalf("delivery %d: %q", i, d.Body)
			}
			d.Ack(false)
		case <-time.After(15 * time.Second):
			t.Fatalf("%d of 100 delivered", i)
		}
	}
}

// TestStrangerNeverJoins starts a node that can reach the cluster's
// gossip and holds its gossip key, but whose node certificate comes from
// another CA: gossip sees it, yet it never becomes a member of the
// metadata group, so no queue is ever placed on it.
func TestStrangerNeverJoins(t *testing.T) {
	ca := nodetest.NewCA(t)
	ms := nodetest.StartCluster(t, 3, nodetest.TLS(t, ca, gossipKey))
	other := nodetest.NewCA(t)
	stranger := nodetest.NewMember(t, "warren-9", ms[0].GossipAddr(), nodetest.TLS(t, other, gossipKey))
	stranger.Start()

	testwait.For(t, 10*time.Second, "the stranger's refusal to be logged", func() bool {
		return slices.Contains(ms[0].GossipMembers(), "warren-9")
	})
	// Several rounds of the metadata leader's membership loop (one a
	// second) must pass without admitting it.
	time.Sleep(3 * time.Second) // proves an absence: nothing to wait for
	for _, m := range ms {
		if slices.Contains(m.MetadataServers(), "warren-9") {
			t.Fatalf("%s admitted a node whose certificate is from another CA: %v", m.Name(), m.MetadataServers())
		}
	}
	ch := ms[0].Channel()
	if _, err := ch.QueueDeclare("placed", true, false, false, false, amqp091.Table{"x-queue-type": "quorum", "x-quorum-initial-group-size": int32(5)}); err != nil {
		t.Fatal(err)
	}
	if servers, _ := ms[0].QueueServers("/", "placed"); servers["warren-9"] {
		t.Fatalf("a queue was placed on the stranger: %v", servers)
	}
}

// TestSecuredNodeRefusesStrangers connects to every port of a secured
// node without valid credentials and tries a state-changing call on each;
// every one is refused, and nothing changes.
func TestSecuredNodeRefusesStrangers(t *testing.T) {
	ca := nodetest.NewCA(t)
	ms := nodetest.StartCluster(t, 3, nodetest.TLS(t, ca, gossipKey))
	target := ms[0]
	addr := target.InternalAddr().String()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	usersBefore := userNames(target.Broker().Users())
	metaBefore := target.MetadataServers()

	// dial connects to the internal port with cfg (nil: plaintext).
	dial := func(cfg *tls.Config) *grpc.ClientConn {
		t.Helper()
		creds := insecure.NewCredentials()
		if cfg != nil {
			creds = grpccreds.NewTLS(cfg)
		}
		c, err := grpc.NewClient(addr, grpc.WithTransportCredentials(creds))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	refused := func(what string, err error, codes ...codes.Code) {
		t.Helper()
		if err == nil {
			t.Errorf("%s: accepted", what)
			return
		}
		if len(codes) > 0 && !slices.Contains(codes, status.Code(err)) {
			t.Errorf("%s: %v, want one of %v", what, err, codes)
		}
	}
	addUser := func(c *grpc.ClientConn, ctx context.Context) error {
		_, err := adminpb.NewAdminClient(c).AddUser(ctx, &adminpb.AddUserRequest{Name: "mallory", Password: "x"})
		return err
	}
	appendEntries := func(c *grpc.ClientConn, as string) error {
		_, err := raftpb.NewRaftClient(c).AppendEntries(ctx, &raftpb.AppendEntriesRequest{Group: "meta", Header: &raftpb.RPCHeader{Id: []byte(as), Addr: []byte(addr)}, Term: 1 << 40})
		return err
	}
	installSnapshot := func(c *grpc.ClientConn) error {
		s, err := raftpb.NewRaftClient(c).InstallSnapshot(ctx)
		if err != nil {
			return err
		}
		if err := s.Send(&raftpb.InstallSnapshotChunk{Request: &raftpb.InstallSnapshotRequest{Group: "meta", Header: &raftpb.RPCHeader{Id: []byte("warren-1")}, Term: 1 << 40}}); err != nil && !errors.Is(err, io.EOF) {
			return err
		}
		_, err = s.CloseAndRecv()
		return err
	}
	joinMeta := func(c *grpc.ClientConn) error {
		_, err := metapb.NewMetaClient(c).AddServer(ctx, &metapb.AddServerRequest{Id: "warren-9", Addr: "127.0.0.1:1"})
		return err
	}

	// Plaintext gRPC on the TLS port: no call gets through.
	plain := dial(nil)
	refused("plaintext AddUser", addUser(plain, ctx))
	refused("plaintext AppendEntries", appendEntries(plain, "warren-1"))

	// TLS without a client certificate: the node answers, but only the
	// admin service, and that only with credentials.
	verifyNode := func(cfg *tls.Config) *tls.Config {
		cfg.InsecureSkipVerify = true // the node's own identity is not what these tests are about
		return cfg
	}
	anon := dial(verifyNode(&tls.Config{}))
	refused("AddUser without credentials", addUser(anon, ctx), codes.Unauthenticated)
	refused("AppendEntries without a certificate", appendEntries(anon, "warren-1"), codes.Unauthenticated)
	refused("InstallSnapshot without a certificate", installSnapshot(anon), codes.Unauthenticated)
	refused("metadata join without a certificate", joinMeta(anon), codes.Unauthenticated)
	withPassword := metadata.AppendToOutgoingContext(ctx, "authorization", "Basic "+base64.StdEncoding.EncodeToString([]byte("guest:wrong")))
	refused("AddUser with a wrong password", addUser(anon, withPassword), codes.Unauthenticated)

	// A certificate from another CA: the handshake fails.
	other := nodetest.NewCA(t)
	_, strangerFiles := nodetest.Issue(t, other, pki.Request{Kind: pki.Node, Name: "warren-1"})
	strangerCert, err := tls.LoadX509KeyPair(strangerFiles.Cert, strangerFiles.Key)
	if err != nil {
		t.Fatal(err)
	}
	stranger := dial(verifyNode(&tls.Config{Certificates: []tls.Certificate{strangerCert}}))
	refused("AppendEntries with another CA's certificate", appendEntries(stranger, "warren-1"))
	refused("AddUser with another CA's certificate", addUser(stranger, ctx))

	// A real node may not speak for another node.
	_, n1Files := nodetest.Issue(t, ca, pki.Request{Kind: pki.Node, Name: "warren-1"})
	n1Cert, err := tls.LoadX509KeyPair(n1Files.Cert, n1Files.Key)
	if err != nil {
		t.Fatal(err)
	}
	n1 := dial(verifyNode(&tls.Config{Certificates: []tls.Certificate{n1Cert}}))
	refused("AppendEntries claiming another node", appendEntries(n1, "warren-2"), codes.PermissionDenied)

	// A client certificate for a user that does not exist.
	_, malloryFiles := nodetest.Issue(t, ca, pki.Request{Kind: pki.Client, Name: "mallory"})
	malloryCert, err := tls.LoadX509KeyPair(malloryFiles.Cert, malloryFiles.Key)
	if err != nil {
		t.Fatal(err)
	}
	mallory := dial(verifyNode(&tls.Config{Certificates: []tls.Certificate{malloryCert}}))
	refused("AddUser as a user that does not exist", addUser(mallory, ctx), codes.Unauthenticated)
	refused("AppendEntries with a client certificate", appendEntries(mallory, "mallory"), codes.Unauthenticated)

	// AMQP without valid credentials (amqp091-go would send guest's).
	for _, auth := range []amqp091.Authentication{&amqp091.PlainAuth{}, &amqp091.PlainAuth{Username: "guest", Password: "wrong"}, &amqp091.ExternalAuth{}} {
		if c, err := amqp091.DialConfig(fmt.Sprintf("amqp://%s/", target.AMQPAddr()), amqp091.Config{SASL: []amqp091.Authentication{auth}}); err == nil {
			c.Close()
			t.Errorf("AMQP with %s %q: logged in", auth.Mechanism(), auth.Response())
		}
	}

	// Gossip without the key: memberlist cannot join.
	cfg := memberlist.DefaultLANConfig()
	cfg.Name = "intruder"
	cfg.BindAddr, cfg.BindPort, cfg.AdvertisePort = "127.0.0.1", 0, 0
	cfg.Logger = nil
	cfg.LogOutput = io.Discard
	cfg.SecretKey = []byte("fedcba9876543210fedcba9876543210")
	ml, err := memberlist.Create(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer ml.Shutdown()
	if n, err := ml.Join([]string{target.GossipAddr()}); err == nil && n > 0 {
		t.Error("gossip with another key joined")
	}

	// Nothing changed.
	if got := userNames(target.Broker().Users()); !slices.Equal(got, usersBefore) {
		t.Errorf("users changed: %v, were %v", got, usersBefore)
	}
	if got := target.MetadataServers(); !slices.Equal(got, metaBefore) {
		t.Errorf("metadata group changed: %v, was %v", got, metaBefore)
	}
}

func userNames(us []catalog.User) []string {
	var names []string
	for _, u := range us {
		names = append(names, u.Name)
	}
	slices.Sort(names)
	return names
}

// TestOperatorTags checks the admin service against RabbitMQ's tags over
// mutual TLS: a monitoring user lists but cannot delete; an administrator
// can; a client certificate names the user.
func TestOperatorTags(t *testing.T) {
	ca := nodetest.NewCA(t)
	ms := nodetest.StartCluster(t, 3, nodetest.TLS(t, ca, gossipKey))
	b := ms[0].Broker()
	if err := b.AddUser("watcher", "watch-pass", []string{"monitoring"}); err != nil {
		t.Fatal(err)
	}
	if err := b.AddUser("boss", "boss-pass", []string{"administrator"}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := grpc.NewClient(ms[0].InternalAddr().String(), grpc.WithTransportCredentials(grpccreds.NewTLS(&tls.Config{InsecureSkipVerify: true})))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	admin := adminpb.NewAdminClient(conn)
	as := func(user, pass string) context.Context {
		return metadata.AppendToOutgoingContext(ctx, "authorization", "Basic "+base64.StdEncoding.EncodeToString([]byte(user+":"+pass)))
	}
	testwait.For(t, 10*time.Second, "the users to reach node 0", func() bool {
		_, err := admin.ListUsers(as("watcher", "watch-pass"), &adminpb.ListUsersRequest{})
		_, err2 := admin.ListUsers(as("boss", "boss-pass"), &adminpb.ListUsersRequest{})
		return err == nil && err2 == nil
	})
	if _, err := admin.DeleteUser(as("watcher", "watch-pass"), &adminpb.UserRequest{Name: "boss"}); status.Code(err) != codes.PermissionDenied {
		t.Fatalf("a monitoring user deleted a user: %v", err)
	}
	if _, err := admin.ListUsers(ctx, &adminpb.ListUsersRequest{}); status.Code(err) != codes.Unauthenticated {
		t.Fatalf("no credentials listed users: %v", err)
	}
	if _, err := admin.DeleteUser(as("boss", "boss-pass"), &adminpb.UserRequest{Name: "watcher"}); err != nil {
		t.Fatalf("an administrator could not delete a user: %v", err)
	}
}
