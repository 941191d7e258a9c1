package admin

import (
	"context"
	"errors"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/warrenmq/warren/proto/adminpb"
)

// SetPolicy implements adminpb.AdminServer.
func (s *Server) SetPolicy(_ context.Context, req *adminpb.SetPolicyRequest) (*adminpb.SetPolicyResponse, error) {
	p := req.GetPolicy()
	if p == nil {
		return nil, status.Error(codes.InvalidArgument, "no policy given")
	}
	info := PolicyInfo{
		Vhost: p.Vhost, Name: p.Name, Pattern: p.Pattern, ApplyTo: p.ApplyTo,
		Definition: p.Definition, Priority: int(p.Priority), Operator: p.Operator,
	}
	if info.Vhost == "" {
		info.Vhost = "/"
	}
	if info.ApplyTo == "" {
		info.ApplyTo = "all" // rabbitmqctl set_policy's default
	}
	if err := s.b.SetPolicy(info); err != nil {
		return nil, policyStatus(err, info.Vhost, info.Name, info.Operator)
	}
	return &adminpb.SetPolicyResponse{}, nil
}

// ClearPolicy implements adminpb.AdminServer.
func (s *Server) ClearPolicy(_ context.Context, req *adminpb.ClearPolicyRequest) (*adminpb.ClearPolicyResponse, error) {
	if req.Vhost == "" {
		req.Vhost = "/"
	}
	if err := s.b.ClearPolicy(req.Vhost, req.Name, req.Operator); err != nil {
		return nil, policyStatus(err, req.Vhost, req.Name, req.Operator)
	}
	return &adminpb.ClearPolicyResponse{}, nil
}

// ListPolicies implements adminpb.AdminServer.
func (s *Server) ListPolicies(_ context.Context, req *adminpb.ListPoliciesRequest) (*adminpb.ListPoliciesResponse, error) {
	resp := &adminpb.ListPoliciesResponse{}
	for _, p := range s.b.Policies(req.Vhost, req.Operator) {
		resp.Policies = append(resp.Policies, &adminpb.Policy{
			Vhost: p.Vhost, Name: p.Name, Pattern: p.Pattern, ApplyTo: p.ApplyTo,
			Definition: p.Definition, Priority: int32(p.Priority), Operator: p.Operator,
		})
	}
	return resp, nil
}

func policyStatus(err error, vhost, name string, operator bool) error {
	kind := "policy"
	if operator {
		kind = "operator policy"
	}
	switch {
	case errors.Is(err, ErrInvalid):
		return status.Error(codes.InvalidArgument, "Validation failed\n\n"+err.Error())
	case errors.Is(err, ErrNotFound):
		// rabbitmqctl clear_policy's answer (rabbit_runtime_parameters).
		return status.Errorf(codes.NotFound, "Parameter does not exist (%s '%s' in vhost '%s')", kind, name, vhost)
	}
	return status.Errorf(codes.Unavailable, "%s '%s' in vhost '%s': %v", kind, name, vhost, err)
}
