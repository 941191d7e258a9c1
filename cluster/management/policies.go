package management

import (
	"encoding/json"
	"net/http"

	"github.com/warrenmq/warren/proto/adminpb"
)

// Policies and operator policies: reading them needs the vhost's
// visibility; changing a policy the policymaker tag, an operator policy
// the administrator tag, as in RabbitMQ.

func policyItem(p *adminpb.Policy) item {
	return item{"vhost": p.Vhost, "name": p.Name, "pattern": p.Pattern, "apply-to": p.ApplyTo, "definition": jsonObject(p.Definition), "priority": p.Priority}
}

func (s definitionsAPI) policyItems(r *http.Request, c *caller, vhost string, operator bool) ([]item, error) {
	resp, err := s.cfg.Admin.ListPolicies(r.Context(), &adminpb.ListPoliciesRequest{Vhost: vhost, Operator: operator})
	if err != nil {
		return nil, adminError(err)
	}
	out := []item{}
	for _, p := range resp.Policies {
		if s.seesVhost(c, p.Vhost) {
			out = append(out, policyItem(p))
		}
	}
	return out, nil
}

func (s definitionsAPI) requirePolicyRights(c *caller, operator bool) error {
	if operator {
		return requireAdmin(c)
	}
	if !c.isPolicymaker() {
		return notAuthorised("Not policymaker user")
	}
	return nil
}

func (s definitionsAPI) listPolicies(operator bool) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request, c *caller) error {
		if err := s.requirePolicyRights(c, operator); err != nil {
			return err
		}
		vhost := r.PathValue("vhost")
		if vhost != "" {
			if err := s.requireVhost(r.Context(), c, vhost); err != nil {
				return err
			}
		}
		items, err := s.policyItems(r, c, vhost, operator)
		if err != nil {
			return err
		}
		replyList(w, r, items, "vhost", "name")
		return nil
	}
}

func (s definitionsAPI) findPolicy(r *http.Request, c *caller, operator bool) (item, error) {
	vhost := r.PathValue("vhost")
	if err := s.requireVhost(r.Context(), c, vhost); err != nil {
		return nil, err
	}
	items, err := s.policyItems(r, c, vhost, operator)
	if err != nil {
		return nil, err
	}
	for _, it := range items {
		if it["name"] == r.PathValue("name") {
			return it, nil
		}
	}
	return nil, notFound()
}

func (s definitionsAPI) getPolicy(operator bool) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request, c *caller) error {
		if err := s.requirePolicyRights(c, operator); err != nil {
			return err
		}
		it, err := s.findPolicy(r, c, operator)
		if err != nil {
			return err
		}
		replyItem(w, r, it)
		return nil
	}
}

func (s definitionsAPI) putPolicy(operator bool) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request, c *caller) error {
		if err := s.requirePolicyRights(c, operator); err != nil {
			return err
		}
		var b body
		if err := decodeBody(r, &b); err != nil {
			return err
		}
		pattern, err := b.str("pattern", "")
		if err != nil {
			return err
		}
		if !b.has("pattern") {
			return badRequest("pattern is required")
		}
		if !b.has("definition") {
			return badRequest("definition is required")
		}
		def, err := b.object("definition")
		if err != nil {
			return err
		}
		applyTo, err := b.str("apply-to", "all")
		if err != nil {
			return err
		}
		prio, err := b.integer("priority", 0)
		if err != nil {
			return err
		}
		defJSON, _ := json.Marshal(def)
		_, err = s.findPolicy(r, c, operator)
		isNew := err != nil
		if err := s.requireVhost(r.Context(), c, r.PathValue("vhost")); err != nil {
			return err
		}
		p := &adminpb.Policy{Vhost: r.PathValue("vhost"), Name: r.PathValue("name"), Pattern: pattern, ApplyTo: applyTo,
			Definition: string(defJSON), Priority: int32(prio), Operator: operator}
		if _, err := s.cfg.Admin.SetPolicy(r.Context(), &adminpb.SetPolicyRequest{Policy: p}); err != nil {
			return adminError(err)
		}
		created(w, isNew)
		return nil
	}
}

func (s definitionsAPI) deletePolicy(operator bool) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request, c *caller) error {
		if err := s.requirePolicyRights(c, operator); err != nil {
			return err
		}
		if err := s.requireVhost(r.Context(), c, r.PathValue("vhost")); err != nil {
			return err
		}
		_, err := s.cfg.Admin.ClearPolicy(r.Context(), &adminpb.ClearPolicyRequest{Vhost: r.PathValue("vhost"), Name: r.PathValue("name"), Operator: operator})
		if err != nil {
			return adminError(err)
		}
		noContent(w)
		return nil
	}
}
