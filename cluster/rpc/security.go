package rpc

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	"github.com/warrenmq/warren/cluster/pki"
)

// A node's internal port serves two kinds of caller: the cluster's other
// nodes (Raft, forwarding, metadata, members, and the admin calls nodes
// make of each other) and operators (warrenctl, on the admin service
// only). With TLS on, every connection is TLS; a client certificate, if
// presented, must chain to the cluster CA or the handshake fails. Then,
// before any handler runs:
//
//   - a caller whose certificate names a node (pki.NodeName) is that node;
//   - on the admin service, any other caller is an operator, named by
//     its client certificate's CN or, without one, by the user name and
//     password it sends (the admin service checks them and the user's
//     tags);
//   - anyone else is refused with codes.Unauthenticated.
//
// Handlers read who called with CallerFrom. A node's claims of who it is
// (a Raft RPC's server ID, a join's node name) are checked against
// Caller.Node where they are made.

// OperatorService is the gRPC service operators may call.
const OperatorService = "/warren.admin.Admin/"

// Caller is who made an RPC, as the server's interceptors proved it.
type Caller struct {
	// Node is the calling node's name, from its certificate.
	Node string
	// CertUser is an operator's user name from its client certificate's
	// CN; empty for a node, or for an operator who sent a password.
	CertUser string
	// Insecure: the port runs without TLS (a loopback development
	// cluster, or --insecure-cluster); nothing was proven.
	Insecure bool
}

type callerKey struct{}

// CallerFrom returns the caller an interceptor proved for ctx's RPC. A
// server without TLS reports an insecure caller.
func CallerFrom(ctx context.Context) Caller {
	c, ok := ctx.Value(callerKey{}).(Caller)
	if !ok {
		return Caller{Insecure: true}
	}
	return c
}

// Security is how a node's internal port proves its callers.
type Security struct {
	// TLS is the node's TLS material; nil runs the port in plaintext,
	// where no caller is proven.
	TLS *pki.Store
	// Authorize, if set, decides every operator call (OperatorService)
	// not made by a node, after the caller is proven: the admin service
	// checks the operator's credentials and tags there.
	Authorize func(ctx context.Context, method string, req any) error
}

// ServerOptions are the options every node's internal gRPC server uses,
// matching the pool's limits and keepalives, and, with sec, TLS and the
// interceptors that prove each caller before its handler runs.
func (sec *Security) ServerOptions() []grpc.ServerOption {
	opts := ServerOptions()
	if sec == nil {
		return opts
	}
	if sec.TLS != nil {
		opts = append(opts, grpc.Creds(credentials.NewTLS(sec.TLS.ServerConfig(tls.VerifyClientCertIfGiven, "h2"))))
	}
	return append(opts,
		grpc.ChainUnaryInterceptor(func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
			ctx, err := sec.admit(ctx, info.FullMethod, req)
			if err != nil {
				return nil, err
			}
			return handler(ctx, req)
		}),
		grpc.ChainStreamInterceptor(func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
			ctx, err := sec.admit(ss.Context(), info.FullMethod, nil)
			if err != nil {
				return err
			}
			return handler(srv, &provenStream{ServerStream: ss, ctx: ctx})
		}),
	)
}

// admit proves the caller of method and, for an operator, has Authorize
// decide.
func (sec *Security) admit(ctx context.Context, method string, req any) (context.Context, error) {
	var err error
	if sec.TLS != nil {
		ctx, err = prove(ctx, method)
	} else {
		ctx = context.WithValue(ctx, callerKey{}, Caller{Insecure: true})
	}
	if err != nil {
		return nil, err
	}
	if c := CallerFrom(ctx); c.Node == "" && sec.Authorize != nil && strings.HasPrefix(method, OperatorService) {
		if err := sec.Authorize(ctx, method, req); err != nil {
			return nil, err
		}
	}
	return ctx, nil
}

// DialOptions are what the pool adds to dial peers with sec.
func (sec *Security) DialOptions() []grpc.DialOption {
	if sec == nil || sec.TLS == nil {
		return nil
	}
	return []grpc.DialOption{grpc.WithTransportCredentials(credentials.NewTLS(sec.TLS.NodeClientConfig()))}
}

type provenStream struct {
	grpc.ServerStream
	ctx context.Context
}

func (s *provenStream) Context() context.Context { return s.ctx }

// prove finds the caller of method, or refuses it.
func prove(ctx context.Context, method string) (context.Context, error) {
	p, ok := peer.FromContext(ctx)
	if !ok {
		return nil, status.Error(codes.Unauthenticated, "no peer")
	}
	info, ok := p.AuthInfo.(credentials.TLSInfo)
	if !ok {
		return nil, status.Error(codes.Unauthenticated, "TLS required")
	}
	var leaf *x509.Certificate
	if len(info.State.VerifiedChains) > 0 {
		leaf = info.State.VerifiedChains[0][0]
	}
	if leaf != nil {
		// The handshake verified the chain for client authentication.
		if name, ok := pki.NodeName(leaf); ok {
			return context.WithValue(ctx, callerKey{}, Caller{Node: name}), nil
		}
	}
	if !strings.HasPrefix(method, OperatorService) {
		return nil, status.Errorf(codes.Unauthenticated, "%s is for the cluster's nodes: a node certificate from the cluster CA is required", method)
	}
	c := Caller{}
	if leaf != nil {
		c.CertUser = leaf.Subject.CommonName
	}
	return context.WithValue(ctx, callerKey{}, c), nil
}

// RequireNode refuses an RPC unless its caller is node name (or the port
// is insecure): a peer may only speak for itself.
func RequireNode(ctx context.Context, name string) error {
	c := CallerFrom(ctx)
	if c.Insecure || c.Node == name {
		return nil
	}
	if c.Node == "" {
		return status.Error(codes.PermissionDenied, "only a cluster node may make this call")
	}
	return status.Errorf(codes.PermissionDenied, "node %q may not speak for %q", c.Node, name)
}
