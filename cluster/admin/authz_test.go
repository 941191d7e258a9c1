package admin

import (
	"context"
	"encoding/base64"
	"net"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	"github.com/warrenmq/warren/proto/adminpb"
)

// fakeUsers has one user per tag, password "pw", and grants the
// management user the vhost "own" only.
type fakeUsers struct{}

func (fakeUsers) CheckPassword(user, password string, _ net.Addr) ([]string, bool) {
	if password != "pw" {
		return nil, false
	}
	return fakeUsers{}.Tags(user, nil)
}

var fakeTags = map[string]string{"admin": "administrator", "monitoring": "monitoring", "policymaker": "policymaker", "management": "management"}

func (fakeUsers) Tags(user string, _ net.Addr) ([]string, bool) {
	tag, ok := fakeTags[user]
	return []string{tag}, ok
}

func (fakeUsers) CanAccessVhost(user, vhost string) bool {
	return user == "management" && vhost == "own"
}

// TestAuthorizeFollowsTags checks each tag against a read-only call, a
// policy call, an administrative call and a nodes-only call, from an
// address that is not loopback, on a port without TLS.
func TestAuthorizeFollowsTags(t *testing.T) {
	s := NewServer(nil, nil, nil)
	s.SetUsers(fakeUsers{})
	remote := &net.TCPAddr{IP: net.ParseIP("192.0.2.1"), Port: 4000}
	as := func(user string) context.Context {
		ctx := peer.NewContext(context.Background(), &peer.Peer{Addr: remote})
		if user == "" {
			return ctx
		}
		auth := "Basic " + base64.StdEncoding.EncodeToString([]byte(user+":pw"))
		return metadata.NewIncomingContext(ctx, metadata.Pairs("authorization", auth))
	}
	const (
		list   = "/warren.admin.Admin/ListExchanges"
		policy = "/warren.admin.Admin/SetPolicy"
		remove = "/warren.admin.Admin/DeleteUser"
		member = "/warren.admin.Admin/MemberMaintenance"
	)
	own := &adminpb.ListExchangesRequest{Vhost: "own"}
	other := &adminpb.ListExchangesRequest{Vhost: "other"}
	for _, tc := range []struct {
		user, method string
		req          any
		want         codes.Code
	}{
		{"", list, own, codes.Unauthenticated},
		{"nobody", list, own, codes.Unauthenticated},
		{"admin", remove, nil, codes.OK},
		{"admin", policy, nil, codes.OK},
		{"monitoring", list, other, codes.OK},
		{"monitoring", policy, nil, codes.PermissionDenied},
		{"monitoring", remove, nil, codes.PermissionDenied},
		{"policymaker", policy, nil, codes.OK},
		{"policymaker", remove, nil, codes.PermissionDenied},
		{"management", list, own, codes.OK},
		{"management", list, other, codes.PermissionDenied},
		{"management", policy, nil, codes.PermissionDenied},
	} {
		err := s.Authorize(as(tc.user), tc.method, tc.req)
		if got := status.Code(err); got != tc.want {
			t.Errorf("%q %s %v: %v, want %v", tc.user, tc.method, tc.req, err, tc.want)
		}
	}
	// A nodes-only call on a port without TLS cannot tell nodes from
	// anyone: it passes there, and is refused to an operator over TLS
	// (cluster/node's TestSecuredNodeRefusesStrangers).
	if err := s.Authorize(as(""), member, nil); err != nil {
		t.Errorf("a nodes-only call on a plaintext port: %v", err)
	}
}
