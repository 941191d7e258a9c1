package management

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"

	"github.com/warrenmq/warren/proto/adminpb"
)

// getDefinitions exports the cluster's definitions in RabbitMQ's format
// (what rabbitmqadmin export writes).
func (s definitionsAPI) getDefinitions(w http.ResponseWriter, r *http.Request, c *caller) error {
	if err := requireAdmin(c); err != nil {
		return err
	}
	doc, err := s.cfg.Admin.ExportDefinitions(r.Context(), &adminpb.ExportDefinitionsRequest{})
	if err != nil {
		return adminError(err)
	}
	w.Header().Set("Content-Type", "application/json")
	if r.URL.Query().Get("download") != "" {
		w.Header().Set("Content-Disposition", `attachment; filename="`+r.URL.Query().Get("download")+`"`)
	}
	w.WriteHeader(http.StatusOK)
	w.Write(doc.Json)
	return nil
}

// postDefinitions imports a definitions document. A document that is
// not JSON is refused before anything is imported; one the import could
// not take all of is answered 400 with what it refused.
func (s definitionsAPI) postDefinitions(w http.ResponseWriter, r *http.Request, c *caller) error {
	if err := requireAdmin(c); err != nil {
		return err
	}
	doc, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
	if err != nil {
		return badRequest("cannot read the body: %v", err)
	}
	var probe map[string]json.RawMessage
	if err := json.Unmarshal(doc, &probe); err != nil {
		return badRequest("malformed definitions document: %v", err)
	}
	resp, err := s.cfg.Admin.ImportDefinitions(r.Context(), &adminpb.DefinitionsDocument{Json: doc})
	if err != nil {
		return adminError(err)
	}
	if len(resp.Problems) > 0 {
		return badRequest("%s", strings.Join(resp.Problems, "; "))
	}
	noContent(w)
	return nil
}
