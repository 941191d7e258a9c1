package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"slices"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	"github.com/warrenmq/warren/proto/adminpb"
)

// leaderSample is one node's answer, at one moment, to "which node leads
// each quorum queue?": queue name to the leading node, "" for a queue
// the node knows no leader of. The report draws each queue's leadership
// over time from these.
type leaderSample struct {
	At      time.Time
	Via     string
	Leaders map[string]string
}

// leaderSampleEvery is how often the nodes are asked.
const leaderSampleEvery = time.Second

// recordLeaders adds a sample to the history.
func (h *history) recordLeaders(s leaderSample) {
	h.mu.Lock()
	h.leaders = append(h.leaders, s)
	h.mu.Unlock()
}

// leaderSamples returns the samples recorded so far, in the order taken.
func (h *history) leaderSamples() []leaderSample {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.leaders)
}

// leaderWatch asks the nodes' admin services who leads each queue, over
// one gRPC connection per node that outlives the node's restarts (gRPC
// dials again by itself). It acts as warrenctl does, with the harness
// user's client certificate.
type leaderWatch struct {
	c       *cluster
	conns   []*grpc.ClientConn
	clients []adminpb.AdminClient
}

// newLeaderWatch opens (lazily: nothing is dialled yet) a connection to
// every node's internal address.
func newLeaderWatch(c *cluster) (*leaderWatch, error) {
	creds, err := adminCredentials(c.ctlAuth)
	if err != nil {
		return nil, err
	}
	lw := &leaderWatch{c: c}
	for _, nd := range c.nodes {
		conn, err := grpc.NewClient(nd.internal, grpc.WithTransportCredentials(creds))
		if err != nil {
			lw.close()
			return nil, fmt.Errorf("admin client for %s: %w", nd.name, err)
		}
		lw.conns = append(lw.conns, conn)
		lw.clients = append(lw.clients, adminpb.NewAdminClient(conn))
	}
	return lw, nil
}

func (lw *leaderWatch) close() {
	for _, conn := range lw.conns {
		conn.Close()
	}
}

// run samples every node that is up, about every leaderSampleEvery, into
// h until ctx ends, each node in a loop of its own so that a slow one
// delays only its own samples. A node down or paused gives no sample
// meanwhile: leadership is unknown while nobody can say.
func (lw *leaderWatch) run(ctx context.Context, h *history) {
	var wg sync.WaitGroup
	for i := range lw.c.nodes {
		wg.Go(func() { lw.sample(ctx, h, i) })
	}
	wg.Wait()
}

// sample asks node i every leaderSampleEvery until ctx ends.
func (lw *leaderWatch) sample(ctx context.Context, h *history, i int) {
	tick := time.NewTicker(leaderSampleEvery)
	defer tick.Stop()
	for {
		if lw.c.nodes[i].answers() {
			if s, err := lw.ask(ctx, i); err == nil {
				h.recordLeaders(s)
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// leaderAnswerWithin is how long a node may take to answer. The listing
// counts each queue's messages, asking leaders, which waits while a
// leader's node has just died; the leaders it names were read before.
const leaderAnswerWithin = 5 * time.Second

// ask asks node i for the leader of every quorum queue it knows. The
// sample is stamped with when it was asked: the node reads the leaders
// first, then counts the messages.
func (lw *leaderWatch) ask(ctx context.Context, i int) (leaderSample, error) {
	asked := time.Now()
	ctx, cancel := context.WithTimeout(ctx, leaderAnswerWithin)
	defer cancel()
	resp, err := lw.clients[i].ListQueues(ctx, &adminpb.ListQueuesRequest{Vhost: "/"})
	if err != nil {
		return leaderSample{}, err
	}
	s := leaderSample{At: asked, Via: lw.c.nodes[i].name, Leaders: map[string]string{}}
	for _, q := range resp.Queues {
		if q.Type == "quorum" {
			s.Leaders[q.Name] = q.Leader
		}
	}
	return s, nil
}

// answers says the node's process is up and not paused: worth asking.
func (nd *node) answers() bool {
	nd.mu.Lock()
	paused := nd.paused
	nd.mu.Unlock()
	return !paused && nd.running()
}

// adminCredentials are warrenctl's credentials for the secured cluster
// (cluster.ctlAuth: --ca, --cert and --key) as gRPC transport
// credentials: the node must present a certificate of the cluster's CA
// for its address, and the harness presents its user's.
func adminCredentials(ctlAuth []string) (credentials.TransportCredentials, error) {
	files := map[string]string{}
	for i := 0; i+1 < len(ctlAuth); i += 2 {
		files[ctlAuth[i]] = ctlAuth[i+1]
	}
	ca, cert, key := files["--ca"], files["--cert"], files["--key"]
	if ca == "" || cert == "" || key == "" {
		return nil, errors.New("the admin service needs --ca, --cert and --key among warrenctl's credentials")
	}
	pem, err := os.ReadFile(ca)
	if err != nil {
		return nil, fmt.Errorf("the cluster CA: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("the cluster CA %s holds no certificate", ca)
	}
	pair, err := tls.LoadX509KeyPair(cert, key)
	if err != nil {
		return nil, fmt.Errorf("the harness's client certificate: %w", err)
	}
	return credentials.NewTLS(&tls.Config{MinVersion: tls.VersionTLS12, RootCAs: pool, Certificates: []tls.Certificate{pair}}), nil
}
