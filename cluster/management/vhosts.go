package management

import (
	"context"
	"net/http"

	"github.com/warrenmq/warren/proto/adminpb"
)

func (s *Server) vhosts(ctx context.Context) ([]*adminpb.Vhost, error) {
	resp, err := s.cfg.Admin.ListVhosts(ctx, &adminpb.ListVhostsRequest{})
	if err != nil {
		return nil, adminError(err)
	}
	return resp.Vhosts, nil
}

func (s *Server) vhostExists(ctx context.Context, name string) (bool, error) {
	vs, err := s.vhosts(ctx)
	if err != nil {
		return false, err
	}
	for _, v := range vs {
		if v.Name == name {
			return true, nil
		}
	}
	return false, nil
}

// vhostItems are the vhosts c sees, with their queues' message counts.
func (s accessAPI) vhostItems(ctx context.Context, c *caller) ([]item, error) {
	vs, err := s.vhosts(ctx)
	if err != nil {
		return nil, err
	}
	queues, err := s.visibleQueues(ctx, c, "")
	if err != nil {
		return nil, err
	}
	type counts struct{ ready, unacked uint64 }
	byVhost := map[string]*counts{}
	for _, q := range queues {
		if byVhost[q.Vhost] == nil {
			byVhost[q.Vhost] = &counts{}
		}
		byVhost[q.Vhost].ready += q.Ready
		byVhost[q.Vhost].unacked += q.Unacked
	}
	var out []item
	for _, v := range vs {
		if !s.seesVhost(c, v.Name) {
			continue
		}
		n := byVhost[v.Name]
		if n == nil {
			n = &counts{}
		}
		limits := item{}
		for k, l := range v.Limits {
			limits[k] = l
		}
		out = append(out, item{
			"name": v.Name, "description": "", "tags": []string{}, "tracing": false,
			"default_queue_type": v.DefaultQueueType, "metadata": item{"description": "", "tags": []string{}, "default_queue_type": v.DefaultQueueType},
			"limits":   limits,
			"messages": n.ready + n.unacked, "messages_ready": n.ready, "messages_unacknowledged": n.unacked,
		})
	}
	return out, nil
}

func (s accessAPI) listVhosts(w http.ResponseWriter, r *http.Request, c *caller) error {
	items, err := s.vhostItems(r.Context(), c)
	if err != nil {
		return err
	}
	replyList(w, r, items, "name")
	return nil
}

func (s accessAPI) getVhost(w http.ResponseWriter, r *http.Request, c *caller) error {
	name := r.PathValue("vhost")
	if err := s.requireVhost(r.Context(), c, name); err != nil {
		return err
	}
	items, err := s.vhostItems(r.Context(), c)
	if err != nil {
		return err
	}
	for _, it := range items {
		if it["name"] == name {
			replyItem(w, r, it)
			return nil
		}
	}
	return notFound()
}

func (s accessAPI) putVhost(w http.ResponseWriter, r *http.Request, c *caller) error {
	if err := requireAdmin(c); err != nil {
		return err
	}
	var b body
	if err := decodeBody(r, &b); err != nil {
		return err
	}
	dqt, err := b.str("default_queue_type", "")
	if err != nil {
		return err
	}
	name := r.PathValue("vhost")
	exists, err := s.vhostExists(r.Context(), name)
	if err != nil {
		return err
	}
	if exists {
		// RabbitMQ updates the metadata of an existing vhost; Warren's
		// vhosts keep their default queue type from creation.
		noContent(w)
		return nil
	}
	if _, err := s.cfg.Admin.AddVhost(r.Context(), &adminpb.AddVhostRequest{Name: name, DefaultQueueType: dqt}); err != nil {
		return adminError(err)
	}
	created(w, true)
	return nil
}

func (s accessAPI) deleteVhost(w http.ResponseWriter, r *http.Request, c *caller) error {
	if err := requireAdmin(c); err != nil {
		return err
	}
	if _, err := s.cfg.Admin.DeleteVhost(r.Context(), &adminpb.VhostRequest{Name: r.PathValue("vhost")}); err != nil {
		return adminError(err)
	}
	noContent(w)
	return nil
}
