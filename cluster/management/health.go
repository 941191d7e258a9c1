package management

import (
	"net/http"
	"slices"
	"strconv"

	"github.com/warrenmq/warren/proto/adminpb"
)

// The health checks answer 200 {"status":"ok"} when they pass and 503
// {"status":"failed","reason":...} when they do not, as RabbitMQ's do,
// for probes that look only at the status code. They need the
// monitoring tag.

func passed(w http.ResponseWriter, extra item) {
	out := item{"status": "ok"}
	for k, v := range extra {
		out[k] = v
	}
	writeJSON(w, http.StatusOK, out)
}

func failed(w http.ResponseWriter, reason string, extra item) {
	out := item{"status": "failed", "reason": reason}
	for k, v := range extra {
		out[k] = v
	}
	writeJSON(w, http.StatusServiceUnavailable, out)
}

func (s healthAPI) alarmCheck(w http.ResponseWriter, r *http.Request, c *caller, localOnly bool) error {
	if err := requireMonitor(c); err != nil {
		return err
	}
	resp, err := s.cfg.Admin.Alarms(r.Context(), &adminpb.AlarmsRequest{})
	if err != nil {
		return adminError(err)
	}
	var alarms []item
	for _, a := range resp.Alarms {
		if localOnly && a.Node != resp.Node {
			continue
		}
		alarms = append(alarms, item{"node": a.Node, "resource": a.Resource})
	}
	if len(alarms) == 0 {
		passed(w, nil)
		return nil
	}
	reason := "There are alarms in effect in the cluster"
	if localOnly {
		reason = "There are alarms in effect on the node"
	}
	failed(w, reason, item{"alarms": alarms})
	return nil
}

func (s healthAPI) checkAlarms(w http.ResponseWriter, r *http.Request, c *caller) error {
	return s.alarmCheck(w, r, c, false)
}

func (s healthAPI) checkLocalAlarms(w http.ResponseWriter, r *http.Request, c *caller) error {
	return s.alarmCheck(w, r, c, true)
}

func (s healthAPI) checkQuorumCritical(w http.ResponseWriter, r *http.Request, c *caller) error {
	if err := requireMonitor(c); err != nil {
		return err
	}
	st, err := s.cfg.Admin.NodeStatus(r.Context(), &adminpb.NodeStatusRequest{})
	if err != nil {
		return adminError(err)
	}
	resp, err := s.cfg.Admin.CheckQuorumCritical(r.Context(), &adminpb.CheckQuorumCriticalRequest{Node: st.Node.Name})
	if err != nil {
		return adminError(err)
	}
	if len(resp.Queues) == 0 {
		passed(w, nil)
		return nil
	}
	var queues []item
	for _, q := range resp.Queues {
		queues = append(queues, item{"name": q.Name, "virtual_host": q.Vhost, "readable_name": "queue '" + q.Name + "' in vhost '" + q.Vhost + "'", "type": "quorum"})
	}
	failed(w, "There are quorum queues that would lose their quorum if the target node is shut down", item{"queues": queues})
	return nil
}

// checkVirtualHosts passes when the node serves clients: Warren's vhosts
// have no processes of their own to be down, so a vhost is up wherever
// its node serves.
func (s healthAPI) checkVirtualHosts(w http.ResponseWriter, r *http.Request, c *caller) error {
	return s.readyCheck(w, r, c, "Some virtual hosts are down")
}

func (s healthAPI) checkReady(w http.ResponseWriter, r *http.Request, c *caller) error {
	return s.readyCheck(w, r, c, "node is not ready to serve clients")
}

func (s healthAPI) readyCheck(w http.ResponseWriter, r *http.Request, c *caller, reason string) error {
	if err := requireMonitor(c); err != nil {
		return err
	}
	st, err := s.cfg.Admin.NodeStatus(r.Context(), &adminpb.NodeStatusRequest{})
	if err != nil {
		return adminError(err)
	}
	if !st.Running {
		failed(w, reason, nil)
		return nil
	}
	passed(w, nil)
	return nil
}

func (s healthAPI) checkPortListener(w http.ResponseWriter, r *http.Request, c *caller) error {
	if err := requireMonitor(c); err != nil {
		return err
	}
	port, err := strconv.Atoi(r.PathValue("port"))
	if err != nil || port < 1 || port > 65535 {
		return badRequest("invalid port %q", r.PathValue("port"))
	}
	var ports []int
	for _, l := range s.cfg.Listeners {
		ports = append(ports, l.Port)
	}
	if slices.Contains(ports, port) {
		passed(w, item{"port": port})
		return nil
	}
	failed(w, "No active listener", item{"missing": port, "ports": ports})
	return nil
}

func (s healthAPI) checkProtocolListener(w http.ResponseWriter, r *http.Request, c *caller) error {
	if err := requireMonitor(c); err != nil {
		return err
	}
	want := normalProtocol(r.PathValue("protocol"))
	var protocols []string
	for _, l := range s.cfg.Listeners {
		protocols = append(protocols, l.Protocol)
	}
	if slices.Contains(protocols, want) {
		passed(w, item{"protocol": want})
		return nil
	}
	failed(w, "No active listener", item{"missing": want, "protocols": protocols})
	return nil
}

// normalProtocol is a protocol name as the listeners call it; RabbitMQ
// takes amqp091, amqp0-9-1 and amqps for theirs.
func normalProtocol(p string) string {
	switch p {
	case "amqp091", "amqp0-9-1", "amqp0.9.1":
		return "amqp"
	case "amqps", "amqp091/ssl":
		return "amqp/ssl"
	}
	return p
}
