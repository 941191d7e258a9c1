package rpc

import (
	"context"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

// countingConn counts the write calls made on a connection.
type countingConn struct {
	net.Conn
	writes *atomic.Int64
}

func (c countingConn) Write(p []byte) (int, error) {
	c.writes.Add(1)
	return c.Conn.Write(p)
}

// Calls a few milliseconds apart, as Raft's heartbeats and a lightly
// loaded queue make them, cost the caller one write each: no
// flow-control PINGs (bandwidth-delay estimation) and their acks beside
// every request and response.
func TestSparseCallsWriteOncePerCall(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer(ServerOptions()...)
	healthpb.RegisterHealthServer(srv, health.NewServer())
	go srv.Serve(ln)
	defer srv.Stop()

	var writes atomic.Int64
	pool := NewPool(grpc.WithContextDialer(func(ctx context.Context, addr string) (net.Conn, error) {
		c, err := (&net.Dialer{}).DialContext(ctx, "tcp", addr)
		if err != nil {
			return nil, err
		}
		return countingConn{c, &writes}, nil
	}))
	defer pool.Close()
	conn, err := pool.Conn(ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	client := healthpb.NewHealthClient(conn)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	check := func() {
		if _, err := client.Check(ctx, &healthpb.HealthCheckRequest{}); err != nil {
			t.Fatalf("health check: %v", err)
		}
	}
	check() // the connection's setup (preface, settings) is not counted
	// A moment for the setup's acknowledgements, which nothing shows.
	time.Sleep(50 * time.Millisecond)

	const calls = 20
	before := writes.Load()
	for range calls {
		check()
		time.Sleep(10 * time.Millisecond) // sparse calls, the case under test
	}
	perCall := float64(writes.Load()-before) / calls
	t.Logf("%.2f writes per call", perCall)
	if perCall > 1.5 {
		t.Errorf("%.2f writes per sparse call, want about 1: flow-control pings are on", perCall)
	}
}
