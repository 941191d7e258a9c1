package management

import (
	"net/http"
	"strings"

	"github.com/warrenmq/warren/proto/adminpb"
)

// Quorum queue membership and leader placement, as RabbitMQ's API
// offers them; administrator only.

func (s queueAPI) replicaChange(w http.ResponseWriter, r *http.Request, c *caller, add bool) error {
	if err := requireAdmin(c); err != nil {
		return err
	}
	var b body
	if err := decodeBody(r, &b); err != nil {
		return err
	}
	node, err := b.str("node", "")
	if err != nil {
		return err
	}
	if node == "" {
		return badRequest("node is required")
	}
	vhost, name := r.PathValue("vhost"), r.PathValue("name")
	if err := s.requireVhost(r.Context(), c, vhost); err != nil {
		return err
	}
	if add {
		_, err = s.cfg.Admin.AddMember(r.Context(), &adminpb.AddMemberRequest{Vhost: vhost, Name: name, Node: node})
	} else {
		_, err = s.cfg.Admin.DeleteMember(r.Context(), &adminpb.DeleteMemberRequest{Vhost: vhost, Name: name, Node: node})
	}
	if err != nil {
		return adminError(err)
	}
	noContent(w)
	return nil
}

func (s queueAPI) addReplica(w http.ResponseWriter, r *http.Request, c *caller) error {
	return s.replicaChange(w, r, c, true)
}

func (s queueAPI) deleteReplica(w http.ResponseWriter, r *http.Request, c *caller) error {
	return s.replicaChange(w, r, c, false)
}

// rebalance moves quorum queue leaders so that each node leads its
// share, and answers with the moves made.
func (s queueAPI) rebalance(w http.ResponseWriter, r *http.Request, c *caller) error {
	if err := requireAdmin(c); err != nil {
		return err
	}
	resp, err := s.cfg.Admin.Rebalance(r.Context(), &adminpb.RebalanceRequest{})
	if err != nil {
		return adminError(err)
	}
	moves := []item{}
	var problems []string
	for _, m := range resp.Moves {
		moves = append(moves, item{"vhost": m.Vhost, "name": m.Name, "from": m.From, "to": m.To, "error": m.Error})
		if m.Error != "" {
			problems = append(problems, m.Vhost+"/"+m.Name+": "+m.Error)
		}
	}
	if len(problems) > 0 {
		s.log.Warn("rebalance: some leaders did not move", "problems", strings.Join(problems, "; "))
	}
	writeJSON(w, http.StatusOK, item{"moves": moves})
	return nil
}
