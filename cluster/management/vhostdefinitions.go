package management

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"

	"github.com/warrenmq/warren/proto/adminpb"
)

// One vhost's definitions, as rabbitmqadmin's export and import with
// --vhost use them: the vhost's queues, exchanges, bindings and
// policies, without a "vhost" field; importing puts each into the
// vhost of the path.

// vhostScoped are the kinds of a definitions document that live in a
// vhost.
var vhostScoped = []string{"queues", "exchanges", "bindings", "policies"}

func (s definitionsAPI) getVhostDefinitions(w http.ResponseWriter, r *http.Request, c *caller) error {
	if err := requireAdmin(c); err != nil {
		return err
	}
	vhost := r.PathValue("vhost")
	if err := s.requireVhost(r.Context(), c, vhost); err != nil {
		return err
	}
	doc, err := s.cfg.Admin.ExportDefinitions(r.Context(), &adminpb.ExportDefinitionsRequest{})
	if err != nil {
		return adminError(err)
	}
	var all map[string]json.RawMessage
	if err := json.Unmarshal(doc.Json, &all); err != nil {
		return internalError(err)
	}
	out := map[string]any{}
	for _, k := range []string{"rabbit_version", "rabbitmq_version", "product_name", "product_version"} {
		if v, ok := all[k]; ok {
			out[k] = v
		}
	}
	for _, kind := range vhostScoped {
		var items []map[string]any
		json.Unmarshal(all[kind], &items)
		kept := []map[string]any{}
		for _, it := range items {
			if it["vhost"] == vhost {
				delete(it, "vhost")
				kept = append(kept, it)
			}
		}
		out[kind] = kept
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

func (s definitionsAPI) postVhostDefinitions(w http.ResponseWriter, r *http.Request, c *caller) error {
	if err := requireAdmin(c); err != nil {
		return err
	}
	vhost := r.PathValue("vhost")
	if err := s.requireVhost(r.Context(), c, vhost); err != nil {
		return err
	}
	raw, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
	if err != nil {
		return badRequest("cannot read the body: %v", err)
	}
	var in map[string]json.RawMessage
	if err := json.Unmarshal(raw, &in); err != nil {
		return badRequest("malformed definitions document: %v", err)
	}
	doc := map[string]any{}
	for _, kind := range vhostScoped {
		if len(in[kind]) == 0 {
			continue
		}
		var items []map[string]any
		if err := json.Unmarshal(in[kind], &items); err != nil {
			return badRequest("%s must be a list of objects: %v", kind, err)
		}
		for _, it := range items {
			it["vhost"] = vhost
		}
		doc[kind] = items
	}
	enc, _ := json.Marshal(doc)
	resp, err := s.cfg.Admin.ImportDefinitions(r.Context(), &adminpb.DefinitionsDocument{Json: enc})
	if err != nil {
		return adminError(err)
	}
	if len(resp.Problems) > 0 {
		return badRequest("%s", strings.Join(resp.Problems, "; "))
	}
	noContent(w)
	return nil
}
