package node

import (
	"encoding/json"
	"fmt"

	"github.com/warrenmq/warren/cluster/admin"
	"github.com/warrenmq/warren/cluster/broker"
)

// The admin service's definitions (admin.DefinitionsBackend).

// definitionAdmin exports and imports definitions; version is the
// node's, which an export records.
type definitionAdmin struct {
	b       *broker.Broker
	version string
}

func (a definitionAdmin) ExportDefinitions() ([]byte, error) {
	d, err := a.b.ExportDefinitions("Warren", a.version)
	if err != nil {
		return nil, err
	}
	return json.MarshalIndent(d, "", "  ")
}

func (a definitionAdmin) ImportDefinitions(doc []byte) (map[string]int, []string, error) {
	var d broker.Definitions
	if err := json.Unmarshal(doc, &d); err != nil {
		return nil, nil, admin.Invalid(fmt.Sprintf("not a definitions document: %v", err))
	}
	r := a.b.ImportDefinitions(&d)
	return r.Imported, r.Problems, nil
}
