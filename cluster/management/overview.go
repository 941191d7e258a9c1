package management

import (
	"context"
	"net/http"
	"runtime"
	"sync"
	"time"

	"github.com/warrenmq/warren/proto/adminpb"
)

// managementVersion is the management API version reported: the
// RabbitMQ release whose API this one follows.
const managementVersion = "4.3.0"

func (s overviewAPI) getWhoami(w http.ResponseWriter, r *http.Request, c *caller) error {
	tags := c.tags
	if tags == nil {
		tags = []string{}
	}
	replyItem(w, r, item{"name": c.name, "tags": tags, "is_internal_user": true})
	return nil
}

func (s overviewAPI) getClusterName(w http.ResponseWriter, r *http.Request, c *caller) error {
	replyItem(w, r, item{"name": s.cfg.ClusterName()})
	return nil
}

func (s overviewAPI) getOverview(w http.ResponseWriter, r *http.Request, c *caller) error {
	ctx := r.Context()
	st, err := s.cfg.Admin.NodeStatus(ctx, &adminpb.NodeStatusRequest{})
	if err != nil {
		return adminError(err)
	}
	queues, err := s.visibleQueues(ctx, c, "")
	if err != nil {
		return err
	}
	var ready, unacked uint64
	consumers := 0
	for _, q := range queues {
		ready += q.Ready
		unacked += q.Unacked
		consumers += int(q.Consumers)
	}
	exchanges, err := s.visibleExchanges(ctx, c, "")
	if err != nil {
		return err
	}
	conns, err := s.visibleConnections(ctx, c, "")
	if err != nil {
		return err
	}
	channels := 0
	for _, cn := range conns {
		channels += len(cn.Channels)
	}
	var listeners, contexts []item
	for _, l := range s.cfg.Listeners {
		switch l.Protocol {
		case "http", "https":
			contexts = append(contexts, item{"node": st.Node.Name, "description": "RabbitMQ Management", "path": "/", "port": l.Port, "ssl": l.Protocol == "https"})
		default:
			listeners = append(listeners, item{"node": st.Node.Name, "protocol": l.Protocol, "ip_address": l.IP, "port": l.Port})
		}
	}
	replyItem(w, r, item{
		"management_version": managementVersion,
		"rabbitmq_version":   managementVersion,
		"product_name":       "Warren",
		"product_version":    s.cfg.Version,
		"erlang_version":     runtime.Version(),
		"cluster_name":       s.cfg.ClusterName(),
		"node":               st.Node.Name,
		"rates_mode":         "none",
		"disable_stats":      true,
		"message_stats":      item{},
		"queue_totals":       item{"messages": ready + unacked, "messages_ready": ready, "messages_unacknowledged": unacked},
		"object_totals": item{
			"connections": len(conns), "channels": channels, "exchanges": len(exchanges),
			"queues": len(queues), "consumers": consumers,
		},
		"listeners": orEmpty(listeners),
		"contexts":  orEmpty(contexts),
	})
	return nil
}

func orEmpty(items []item) []item {
	if items == nil {
		return []item{}
	}
	return items
}

func (s overviewAPI) listNodes(w http.ResponseWriter, r *http.Request, c *caller) error {
	if err := requireMonitor(c); err != nil {
		return err
	}
	nodes, err := s.nodes(r.Context())
	if err != nil {
		return err
	}
	replyList(w, r, nodes, "name")
	return nil
}

func (s overviewAPI) getNode(w http.ResponseWriter, r *http.Request, c *caller) error {
	if err := requireMonitor(c); err != nil {
		return err
	}
	nodes, err := s.nodes(r.Context())
	if err != nil {
		return err
	}
	for _, n := range nodes {
		if n["name"] == r.PathValue("node") {
			replyItem(w, r, n)
			return nil
		}
	}
	return notFound()
}

// nodeWait bounds how long /api/nodes waits for one node's figures.
const nodeWait = 3 * time.Second

// nodes describes every node of the cluster with RabbitMQ's fields; a
// node that is down, or does not answer in time, shows as not running
// without figures.
func (s overviewAPI) nodes(ctx context.Context) ([]item, error) {
	cs, err := s.cfg.Admin.ClusterStatus(ctx, &adminpb.ClusterStatusRequest{})
	if err != nil {
		return nil, adminError(err)
	}
	out := make([]item, len(cs.Nodes))
	var wg sync.WaitGroup
	for i, n := range cs.Nodes {
		out[i] = item{
			"name": n.Name, "type": "disc", "running": n.State == "alive",
			"being_drained": n.Draining, "partitions": []string{},
			"mem_alarm": contains(n.Alarms, "memory"), "disk_free_alarm": contains(n.Alarms, "disk"),
			"metadata_role": n.MetadataRole, "version": n.Version,
			"cluster_links": []item{},
		}
		if n.State != "alive" {
			continue
		}
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(ctx, nodeWait)
			defer cancel()
			st, err := s.cfg.Admin.NodeStatusOn(ctx, n.Name)
			if err != nil {
				s.log.Debug("node figures unavailable", "node", n.Name, "err", err)
				return
			}
			it := out[i]
			it["mem_used"] = st.MemoryUsedBytes
			it["mem_limit"] = st.MemoryLimitBytes
			it["disk_free"] = st.DiskFreeBytes
			it["disk_free_limit"] = st.DiskFreeLimitBytes
			it["uptime"] = time.Since(time.UnixMilli(st.StartedUnixMs)).Milliseconds()
			it["proc_used"] = st.Goroutines
			it["os_pid"] = st.Pid
			it["run_queue"] = 0
			it["data_dir"] = st.DataDir
		})
	}
	wg.Wait()
	return out, nil
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}
