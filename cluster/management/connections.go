package management

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"

	"github.com/warrenmq/warren/proto/adminpb"
)

// Connections, their channels and consumers are listed from every node
// (the admin service asks each). As in RabbitMQ, a user without the
// monitoring tag sees only its own.

func (s *Server) visibleConnections(ctx context.Context, c *caller, vhost string) ([]*adminpb.Connection, error) {
	resp, err := s.cfg.Admin.ListConnections(ctx, &adminpb.ListConnectionsRequest{Vhost: vhost})
	if err != nil {
		return nil, adminError(err)
	}
	for _, u := range resp.Unreachable {
		s.log.Debug("connections of a node not listed", "node", u.Node, "err", u.Error)
	}
	var out []*adminpb.Connection
	for _, cn := range resp.Connections {
		if c.isMonitor() || cn.User == c.name {
			out = append(out, cn)
		}
	}
	return out, nil
}

// hostPort splits "host:port".
func hostPort(addr string) (string, int) {
	h, p, err := net.SplitHostPort(addr)
	if err != nil {
		return addr, 0
	}
	n, _ := strconv.Atoi(p)
	return h, n
}

func connectionItem(cn *adminpb.Connection) item {
	peer, local, _ := strings.Cut(cn.Name, " -> ")
	peerHost, peerPort := hostPort(peer)
	host, port := hostPort(local)
	state := "running"
	if cn.Blocked {
		state = "blocked"
	}
	props := item{}
	for k, v := range map[string]string{"connection_name": cn.ClientName, "product": cn.ClientProduct, "version": cn.ClientVersion, "platform": cn.ClientPlatform} {
		if v != "" {
			props[k] = v
		}
	}
	return item{
		"name": cn.Name, "node": cn.Node, "user": cn.User, "vhost": cn.Vhost,
		"client_properties": props, "connected_at": cn.ConnectedAtUnixMs,
		"frame_max": cn.FrameMax, "channel_max": cn.ChannelMax, "timeout": cn.HeartbeatSeconds,
		"channels": len(cn.Channels), "state": state, "recv_oct": cn.RecvBytes, "send_oct": cn.SentBytes,
		"peer_host": peerHost, "peer_port": peerPort, "host": host, "port": port,
		"protocol": "AMQP 0-9-1", "type": "network", "ssl": false, "auth_mechanism": "PLAIN",
		"user_provided_name": cn.ClientName,
	}
}

func (s clientAPI) replyConnections(w http.ResponseWriter, r *http.Request, c *caller, vhost string) error {
	conns, err := s.visibleConnections(r.Context(), c, vhost)
	if err != nil {
		return err
	}
	items := make([]item, len(conns))
	for i, cn := range conns {
		items[i] = connectionItem(cn)
	}
	replyList(w, r, items, "name")
	return nil
}

func (s clientAPI) listConnections(w http.ResponseWriter, r *http.Request, c *caller) error {
	return s.replyConnections(w, r, c, "")
}

func (s clientAPI) listVhostConnections(w http.ResponseWriter, r *http.Request, c *caller) error {
	if err := s.requireVhost(r.Context(), c, r.PathValue("vhost")); err != nil {
		return err
	}
	return s.replyConnections(w, r, c, r.PathValue("vhost"))
}

func (s clientAPI) findConnection(r *http.Request, c *caller) (*adminpb.Connection, error) {
	conns, err := s.visibleConnections(r.Context(), c, "")
	if err != nil {
		return nil, err
	}
	for _, cn := range conns {
		if cn.Name == r.PathValue("name") {
			return cn, nil
		}
	}
	return nil, notFound()
}

func (s clientAPI) getConnection(w http.ResponseWriter, r *http.Request, c *caller) error {
	cn, err := s.findConnection(r, c)
	if err != nil {
		return err
	}
	replyItem(w, r, connectionItem(cn))
	return nil
}

// closeConnection closes a client connection, telling the client
// X-Reason if given. A user may close its own; closing another's needs
// the administrator tag.
func (s clientAPI) closeConnection(w http.ResponseWriter, r *http.Request, c *caller) error {
	cn, err := s.findConnection(r, c)
	if err != nil {
		return err
	}
	if cn.User != c.name && !c.isAdmin() {
		return notAuthorised("Not administrator user")
	}
	reason := r.Header.Get("X-Reason")
	if reason == "" {
		reason = "Closed via management plugin"
	}
	resp, err := s.cfg.Admin.CloseConnections(r.Context(), &adminpb.CloseConnectionsRequest{Name: cn.Name, Node: cn.Node, Reason: reason})
	if err != nil {
		return adminError(err)
	}
	if len(resp.Closed) == 0 {
		return notFound()
	}
	noContent(w)
	return nil
}

func channelName(cn *adminpb.Connection, ch *adminpb.Channel) string {
	return fmt.Sprintf("%s (%d)", cn.Name, ch.Number)
}

func channelItem(cn *adminpb.Connection, ch *adminpb.Channel) item {
	peerHost, peerPort := hostPort(strings.SplitN(cn.Name, " -> ", 2)[0])
	return item{
		"name": channelName(cn, ch), "number": ch.Number, "node": cn.Node, "user": cn.User, "vhost": cn.Vhost,
		"connection_details": item{"name": cn.Name, "peer_host": peerHost, "peer_port": peerPort},
		"confirm":            ch.Confirm, "transactional": ch.Transactional,
		"prefetch_count": ch.PrefetchCount, "global_prefetch_count": ch.GlobalPrefetchCount,
		"messages_unacknowledged": ch.Unacked, "messages_unconfirmed": ch.Unconfirmed,
		"consumer_count": len(ch.Consumers), "state": "running",
	}
}

func (s clientAPI) replyChannels(w http.ResponseWriter, r *http.Request, c *caller, vhost, conn string) error {
	conns, err := s.visibleConnections(r.Context(), c, vhost)
	if err != nil {
		return err
	}
	items := []item{}
	for _, cn := range conns {
		if conn != "" && cn.Name != conn {
			continue
		}
		for _, ch := range cn.Channels {
			items = append(items, channelItem(cn, ch))
		}
	}
	replyList(w, r, items, "name")
	return nil
}

func (s clientAPI) listChannels(w http.ResponseWriter, r *http.Request, c *caller) error {
	return s.replyChannels(w, r, c, "", "")
}

func (s clientAPI) listVhostChannels(w http.ResponseWriter, r *http.Request, c *caller) error {
	if err := s.requireVhost(r.Context(), c, r.PathValue("vhost")); err != nil {
		return err
	}
	return s.replyChannels(w, r, c, r.PathValue("vhost"), "")
}

func (s clientAPI) listConnectionChannels(w http.ResponseWriter, r *http.Request, c *caller) error {
	if _, err := s.findConnection(r, c); err != nil {
		return err
	}
	return s.replyChannels(w, r, c, "", r.PathValue("name"))
}

// listConsumers lists the consumers of the channels c sees, as
// RabbitMQ's /api/consumers does.
func (s clientAPI) listConsumers(w http.ResponseWriter, r *http.Request, c *caller) error {
	vhost := r.PathValue("vhost")
	if vhost != "" {
		if err := s.requireVhost(r.Context(), c, vhost); err != nil {
			return err
		}
	}
	conns, err := s.visibleConnections(r.Context(), c, vhost)
	if err != nil {
		return err
	}
	items := []item{}
	for _, cn := range conns {
		for _, ch := range cn.Channels {
			for _, co := range ch.Consumers {
				items = append(items, item{
					"queue":            item{"name": co.Queue, "vhost": cn.Vhost},
					"channel_details":  item{"name": channelName(cn, ch), "number": ch.Number, "node": cn.Node, "user": cn.User, "connection_name": cn.Name},
					"consumer_tag":     co.Tag,
					"ack_required":     co.AckRequired,
					"exclusive":        co.Exclusive,
					"prefetch_count":   co.PrefetchCount,
					"priority":         co.Priority,
					"arguments":        jsonObject(co.Arguments),
					"active":           true,
					"activity_status":  "up",
					"consumer_timeout": nil,
				})
			}
		}
	}
	replyList(w, r, items, "queue.vhost", "queue.name", "consumer_tag")
	return nil
}
