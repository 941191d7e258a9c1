package admin

import (
	"context"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/warrenmq/warren/proto/adminpb"
)

// Definitions: RabbitMQ's definitions document, exported from the
// answering node's copy of the metadata and imported through it.

// DefinitionsBackend is what a Backend offers for definitions. A Backend
// without it answers Unimplemented.
type DefinitionsBackend interface {
	// ExportDefinitions is the cluster's definitions as a JSON document.
	ExportDefinitions() ([]byte, error)
	// ImportDefinitions adds what the JSON document defines and returns
	// how many items of each kind it took and what it could not take.
	// The error wraps ErrInvalid if the document does not read.
	ImportDefinitions(doc []byte) (imported map[string]int, problems []string, err error)
}

func (s *Server) definitions() (DefinitionsBackend, error) {
	return optional[DefinitionsBackend](s, "definitions are")
}

// ExportDefinitions implements adminpb.AdminServer.
func (s *Server) ExportDefinitions(context.Context, *adminpb.ExportDefinitionsRequest) (*adminpb.DefinitionsDocument, error) {
	db, err := s.definitions()
	if err != nil {
		return nil, err
	}
	doc, err := db.ExportDefinitions()
	if err != nil {
		return nil, status.Error(codes.Unavailable, err.Error())
	}
	return &adminpb.DefinitionsDocument{Json: doc}, nil
}

// ImportDefinitions implements adminpb.AdminServer.
func (s *Server) ImportDefinitions(_ context.Context, req *adminpb.DefinitionsDocument) (*adminpb.ImportDefinitionsResponse, error) {
	db, err := s.definitions()
	if err != nil {
		return nil, err
	}
	imported, problems, err := db.ImportDefinitions(req.Json)
	if err != nil {
		return nil, statusOf(err, codes.Unavailable)
	}
	resp := &adminpb.ImportDefinitionsResponse{Imported: map[string]uint32{}, Problems: problems}
	for k, n := range imported {
		resp.Imported[k] = uint32(n)
	}
	return resp, nil
}
