package admin

import (
	"context"
	"errors"
	"fmt"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/warrenmq/warren/cluster/alarm"
	"github.com/warrenmq/warren/proto/adminpb"
)

// Resource alarms: every node knows every alarm in effect (gossip carries
// each node's own), so the answering node lists them all from its own
// view; the watermarks it shows and changes are its own, as rabbitmqctl's
// set_vm_memory_high_watermark and set_disk_free_limit change the target
// node's.

// AlarmsBackend is what a Backend offers for resource alarms. A Backend
// without it answers Unimplemented.
type AlarmsBackend interface {
	// Alarms is every resource alarm in effect across the cluster as
	// this node knows them, by node then resource.
	Alarms() []alarm.Alarm
	// Resources is this node's use of what its alarms watch, and its
	// watermarks.
	Resources() Resources
	// SetWatermark changes this node's memory high watermark
	// (alarm.Memory) or disk free limit (alarm.Disk) until it stops,
	// value read as the node's flags read it. The error wraps ErrInvalid
	// if value does not read.
	SetWatermark(r alarm.Resource, value string) error
}

// Resources is a node's use of what its alarms watch, and its watermarks.
type Resources struct {
	// MemoryUsed: the memory it uses as its memory alarm counts it;
	// MemoryHeld: message bytes its in-memory queues hold, part of it;
	// MemoryLimit: the memory high watermark, zero if none.
	MemoryUsed, MemoryHeld, MemoryLimit int64
	// DiskFree: free space of its data directory's file system, -1 if
	// unknown; DiskFreeLimit: the disk free limit, zero if none.
	DiskFree, DiskFreeLimit int64
}

// Alarms implements adminpb.AdminServer.
func (s *Server) Alarms(context.Context, *adminpb.AlarmsRequest) (*adminpb.AlarmsResponse, error) {
	ab, err := optional[AlarmsBackend](s, "resource alarms are")
	if err != nil {
		return nil, err
	}
	return s.alarmsResponse(ab), nil
}

// SetWatermark implements adminpb.AdminServer.
func (s *Server) SetWatermark(_ context.Context, req *adminpb.SetWatermarkRequest) (*adminpb.AlarmsResponse, error) {
	ab, err := optional[AlarmsBackend](s, "resource alarms are")
	if err != nil {
		return nil, err
	}
	r := alarm.Resource(req.Resource)
	if r != alarm.Memory && r != alarm.Disk {
		return nil, status.Errorf(codes.InvalidArgument, "no watermark for resource %q (memory or disk)", req.Resource)
	}
	if err := ab.SetWatermark(r, req.Value); err != nil {
		if errors.Is(err, ErrInvalid) {
			return nil, status.Error(codes.InvalidArgument, err.Error())
		}
		return nil, status.Error(codes.Internal, fmt.Sprintf("set the %s watermark: %v", r, err))
	}
	return s.alarmsResponse(ab), nil
}

func (s *Server) alarmsResponse(ab AlarmsBackend) *adminpb.AlarmsResponse {
	res := ab.Resources()
	resp := &adminpb.AlarmsResponse{
		Node:               s.b.Self(),
		MemoryUsedBytes:    res.MemoryUsed,
		MemoryMessageBytes: res.MemoryHeld,
		MemoryLimitBytes:   res.MemoryLimit,
		DiskFreeBytes:      res.DiskFree,
		DiskFreeLimitBytes: res.DiskFreeLimit,
	}
	for _, a := range ab.Alarms() {
		resp.Alarms = append(resp.Alarms, &adminpb.ResourceAlarm{Node: a.Node, Resource: string(a.Resource)})
	}
	return resp
}
