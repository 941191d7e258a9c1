package main

import (
	"context"
	"encoding/base64"
	"slices"
	"strconv"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/warrenmq/warren/proto/adminpb"
	"github.com/warrenmq/warren/raftq/testwait"
)

// TestClusterPublishAfterMetadataLeaderKilled: a client declares a queue
// through the metadata leader, which is killed at once; publishes through
// the other nodes must reach the queue. Those nodes learn that the
// declaration committed only from the next metadata leader, seconds later;
// until the fix, they confirmed the publishes meanwhile and dropped them as
// unroutable (found by jepsen/: every run lost the first seconds of one
// queue's messages).
func TestClusterPublishAfterMetadataLeaderKilled(t *testing.T) {
	if testing.Short() {
		t.Skip("cluster process test")
	}
	c := startProcCluster(t, 3, clusterOpts{})
	leader := metadataLeader(t, c)
	declareQuorum(t, c.nodes[leader], "fresh")
	c.nodes[leader].kill()
	other := c.nodes[(leader+1)%3]
	again := publishConfirmed(t, other, "fresh", 0, 50)

	_, ch := other.channel(t)
	seen := map[string]int{}
	// What arrived within 30 s is checked below.
	testwait.Until(30*time.Second, func() bool {
		for len(seen) < 50 {
			d, ok, err := ch.Get("fresh", true)
			if err != nil {
				t.Fatalf("get: %v", err)
			}
			if !ok {
				return false
			}
			seen[string(d.Body)]++
		}
		return true
	})
	// Once each; more only if it was published again after a nack, at most
	// once per send (the
	// queue's first leader was the node killed, and the publish timed out
	// while the others elected): a nacked publish may still be stored.
	for i := 0; i < 50; i++ {
		if n := seen[strconv.Itoa(i)]; n < 1 || n > 1+again[i] {
			t.Errorf("confirmed message %d delivered %d times (published %d more times after a nack)", i, n, again[i])
		}
	}
}

// metadataLeader is the index of the node leading the metadata group.
func metadataLeader(t *testing.T, c *procCluster) int {
	t.Helper()
	admin := adminClient(t, c.nodes[0])
	leader := -1
	testwait.For(t, 30*time.Second, "a metadata leader reported", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		st, err := admin.ClusterStatus(ctx, &adminpb.ClusterStatusRequest{})
		cancel()
		if err == nil {
			leader = slices.IndexFunc(c.nodes, func(nd *clusterNode) bool { return nd.name == st.MetadataLeader })
		}
		return leader >= 0
	})
	return leader
}

// adminClient is a client of nd's admin service (warrenctl's), closed
// when the test ends. A node in a network namespace is reached off
// loopback, where an operator must log in: as remoteUserConfig's user.
func adminClient(t *testing.T, nd *clusterNode) adminpb.AdminClient {
	t.Helper()
	opts := []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}
	if nd.netns != "" {
		opts = append(opts, grpc.WithPerRPCCredentials(basicAuth{"test", "test"}))
	}
	conn, err := grpc.NewClient(nd.internal, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return adminpb.NewAdminClient(conn)
}

// basicAuth sends an operator's name and password with every call, as
// warrenctl's --user and --password do.
type basicAuth struct{ user, password string }

func (b basicAuth) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	return map[string]string{"authorization": "Basic " + base64.StdEncoding.EncodeToString([]byte(b.user+":"+b.password))}, nil
}

func (basicAuth) RequireTransportSecurity() bool { return false }
