package admin

import (
	"context"
	"os"
	"runtime"
	"time"

	"github.com/warrenmq/warren/membership"
	"github.com/warrenmq/warren/proto/adminpb"
)

// A node's own status, as rabbitmq-diagnostics status shows it: the one
// call an operator (or a container's health check) makes to learn whether
// this node is up, serving, and how loaded.

// StatusBackend is what a Backend offers for the node's status. A Backend
// without it answers Unimplemented.
type StatusBackend interface {
	NodeStatus() NodeStatus
}

// NodeStatus is what only the node itself knows of its state.
type NodeStatus struct {
	Started time.Time
	DataDir string
	// AMQPListen is the address the AMQP listener is bound to.
	AMQPListen string
	// Running: serving clients (a metadata leader known, this node's
	// copy of the metadata caught up since it started).
	Running               bool
	Connections, Channels int
	// PayloadCache is the bytes of message payloads the node's replicas
	// keep in memory for delivery, and PayloadCacheLimit their bound.
	PayloadCache, PayloadCacheLimit int64
}

// NodeStatus implements adminpb.AdminServer.
func (s *Server) NodeStatus(context.Context, *adminpb.NodeStatusRequest) (*adminpb.NodeStatusResponse, error) {
	sb, err := optional[StatusBackend](s, "node status is")
	if err != nil {
		return nil, err
	}
	st := sb.NodeStatus()
	self := s.b.Self()
	resp := &adminpb.NodeStatusResponse{
		Node:           &adminpb.Node{Name: self, State: membership.Alive.String(), MetadataRole: string(MetadataRoleNone)},
		GoVersion:      runtime.Version(),
		Pid:            int64(os.Getpid()),
		StartedUnixMs:  st.Started.UnixMilli(),
		DataDir:        st.DataDir,
		Running:        st.Running,
		MetadataLeader: s.b.MetadataLeader(),
		Replicas:       map[string]uint32{},
		Connections:    uint32(st.Connections),
		Channels:       uint32(st.Channels),
		Goroutines:     uint32(runtime.NumGoroutine()),
		AmqpListenAddr: st.AMQPListen,

		PayloadCacheBytes:      st.PayloadCache,
		PayloadCacheLimitBytes: st.PayloadCacheLimit,
	}
	for _, n := range s.b.Nodes() {
		if n.Name == self {
			resp.Node = nodePB(n)
		}
	}
	for _, m := range s.b.LocalMembers() {
		resp.Replicas[string(m.Role)]++
	}
	if ab, err := optional[AlarmsBackend](s, "resource alarms are"); err == nil {
		res := ab.Resources()
		resp.MemoryUsedBytes, resp.MemoryLimitBytes = res.MemoryUsed, res.MemoryLimit
		resp.DiskFreeBytes, resp.DiskFreeLimitBytes = res.DiskFree, res.DiskFreeLimit
	}
	return resp, nil
}
