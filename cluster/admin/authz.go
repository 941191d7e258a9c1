package admin

import (
	"context"
	"encoding/base64"
	"net"
	"slices"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	"github.com/warrenmq/warren/cluster/rpc"
)

// Operators are RabbitMQ users, and what they may do follows RabbitMQ's
// user tags:
//
//   - administrator: everything;
//   - monitoring: read-only listings, statuses and health checks;
//   - policymaker: those, plus policies;
//   - management: the read-only calls that name one of the user's own
//     vhosts (one the user has permissions in).
//
// Calls that only nodes make of each other (Member…, Local…) are refused
// to operators. An operator proves who it is with a client certificate
// from the cluster CA (its CN is the user) or with the user's name and
// password in the call's "authorization" metadata (HTTP Basic). A node
// whose internal port runs without TLS on loopback (a development node,
// `make run`) trusts the processes of its own host, as rabbitmqctl trusts
// whoever can read the Erlang cookie: a call there without credentials
// acts as an administrator.

// Users is what authorization needs to know of the cluster's users.
type Users interface {
	// CheckPassword returns the tags of user if password is its password.
	CheckPassword(user, password string, from net.Addr) (tags []string, ok bool)
	// Tags returns the tags of an existing user who may connect from
	// from (a loopback-only user, guest, only from loopback).
	Tags(user string, from net.Addr) (tags []string, ok bool)
	// CanAccessVhost reports whether user has permissions in vhost.
	CanAccessVhost(user, vhost string) bool
}

// SetUsers turns authorization on: without it every call is allowed (tests
// of the service alone).
func (s *Server) SetUsers(u Users) { s.users.Store(&u) }

// access is what a call requires.
type access int

const (
	readOnly access = iota
	policy
	administration
	nodesOnly
)

// readOnlyCalls are the calls a monitoring user may make.
var readOnlyCalls = []string{
	"ClusterStatus", "NodeStatus", "ListQueues", "QuorumStatus", "ListPolicies",
	"CheckQuorumCritical", "CheckLeaderless", "CheckReplicasSynced", "ListConnections",
	"QuorumConsumers", "Alarms", "ListUsers", "ListVhosts", "ListPermissions",
	"ListExchanges", "ListBindings",
}

func accessOf(method string) access {
	name := method[strings.LastIndexByte(method, '/')+1:]
	switch {
	case strings.HasPrefix(name, "Member"), strings.HasPrefix(name, "Local"):
		return nodesOnly
	case slices.Contains(readOnlyCalls, name):
		return readOnly
	case name == "SetPolicy" || name == "ClearPolicy":
		return policy
	}
	return administration
}

// Authorize is rpc.Security's hook for operator calls.
func (s *Server) Authorize(ctx context.Context, method string, req any) error {
	users := s.users.Load()
	if users == nil {
		return nil
	}
	need := accessOf(method)
	caller := rpc.CallerFrom(ctx)
	if need == nodesOnly {
		if caller.Insecure {
			// A plaintext port cannot tell its peers from anyone else:
			// the price of running a cluster without TLS.
			return nil
		}
		return status.Errorf(codes.PermissionDenied, "%s is made by nodes of each other only", method)
	}
	from := peerAddr(ctx)
	user, tags, err := operator(ctx, *users, caller, from)
	if err != nil {
		s.log.Warn("admin call refused: not authenticated", "method", method, "remote", addrString(from), "err", err)
		return err
	}
	if !allowed(need, tags) && !(slices.Contains(tags, "management") && need == readOnly && ownVhost(*users, user, req)) {
		s.log.Warn("admin call refused: not permitted", "method", method, "user", user, "tags", tags, "remote", addrString(from))
		return status.Errorf(codes.PermissionDenied, "user %q (tags %v) may not call %s: %s", user, tags, method, needWords(need))
	}
	if need != readOnly {
		s.log.Info("admin call", "method", method, "user", user, "remote", addrString(from))
	}
	return nil
}

// localOperator is the user a credential-free call from loopback acts as
// on a node without TLS.
const localOperator = "(local operator)"

// operator finds who made an operator call, and the user's tags.
func operator(ctx context.Context, users Users, caller rpc.Caller, from net.Addr) (string, []string, error) {
	if caller.CertUser != "" {
		tags, ok := users.Tags(caller.CertUser, from)
		if !ok {
			return "", nil, status.Errorf(codes.Unauthenticated, "no user %q for the client certificate", caller.CertUser)
		}
		return caller.CertUser, tags, nil
	}
	if user, pass, ok := basicAuth(ctx); ok {
		tags, ok := users.CheckPassword(user, pass, from)
		if !ok {
			return "", nil, status.Error(codes.Unauthenticated, "invalid user name or password")
		}
		return user, tags, nil
	}
	if caller.Insecure && isLoopback(from) {
		return localOperator, []string{"administrator"}, nil
	}
	return "", nil, status.Error(codes.Unauthenticated, "credentials required: a client certificate from the cluster CA, or a user name and password")
}

func allowed(need access, tags []string) bool {
	has := func(t string) bool { return slices.Contains(tags, t) }
	switch need {
	case readOnly:
		return has("administrator") || has("monitoring") || has("policymaker")
	case policy:
		return has("administrator") || has("policymaker")
	}
	return has("administrator")
}

func needWords(need access) string {
	switch need {
	case readOnly:
		return "it needs the administrator, monitoring or policymaker tag (management: for the user's own vhosts)"
	case policy:
		return "it needs the administrator or policymaker tag"
	}
	return "it needs the administrator tag"
}

// ownVhost reports whether req names a vhost user has permissions in.
func ownVhost(users Users, user string, req any) bool {
	v, ok := req.(interface{ GetVhost() string })
	return ok && v.GetVhost() != "" && users.CanAccessVhost(user, v.GetVhost())
}

// basicAuth reads the call's "authorization: Basic …" metadata.
func basicAuth(ctx context.Context) (user, pass string, ok bool) {
	md, _ := metadata.FromIncomingContext(ctx)
	for _, v := range md.Get("authorization") {
		enc, found := strings.CutPrefix(v, "Basic ")
		if !found {
			continue
		}
		raw, err := base64.StdEncoding.DecodeString(enc)
		if err != nil {
			return "", "", false
		}
		user, pass, ok = strings.Cut(string(raw), ":")
		return user, pass, ok
	}
	return "", "", false
}

func peerAddr(ctx context.Context) net.Addr {
	if p, ok := peer.FromContext(ctx); ok {
		return p.Addr
	}
	return nil
}

func isLoopback(a net.Addr) bool {
	t, ok := a.(*net.TCPAddr)
	return ok && t.IP.IsLoopback()
}

func addrString(a net.Addr) string {
	if a == nil {
		return ""
	}
	return a.String()
}
