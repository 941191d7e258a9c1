package node

import (
	"context"
	"errors"
	"fmt"
	"net"

	"google.golang.org/grpc"

	"github.com/warrenmq/warren/cluster/admin"
	"github.com/warrenmq/warren/cluster/rpc"
	"github.com/warrenmq/warren/membership"
)

// A standalone node (no --internal-addr) has no internal port, yet its
// operators need warrenctl as much as a cluster's do. With AdminAddr set it
// serves the admin service alone there, answering for itself as a cluster
// of one would: its users, vhosts, permissions, policies, exchanges,
// bindings, queues, definitions, clients and alarms. The calls that only
// make sense in a cluster (members, leadership, drain) say so.

// standaloneName is how a standalone node names itself to warrenctl.
const standaloneName = "standalone"

// errNotClustered answers the calls that need a cluster.
var errNotClustered = admin.Invalid("this node is standalone, not a cluster member: start it with --internal-addr to cluster it")

// standaloneAdmin is a standalone node's admin backend.
type standaloneAdmin struct {
	connectionAdmin // client connections and the node's status (admin_connections.go)
	policyAdmin     // policies (admin_policies.go)
	accessAdmin     // users, vhosts, permissions (access.go)
	entityAdmin     // exchanges, bindings, queue operations (entities.go)
	definitionAdmin // definitions export and import (definitions.go)
	alarmAdmin      // resource alarms (alarms.go)
	n               *Node
	addr            string
}

func newStandaloneAdmin(n *Node, addr, version string) *standaloneAdmin {
	b := n.broker
	return &standaloneAdmin{
		connectionAdmin: connectionAdmin{b: b, n: n},
		policyAdmin:     policyAdmin{b: b},
		accessAdmin:     accessAdmin{b: b},
		entityAdmin:     entityAdmin{b: b},
		definitionAdmin: definitionAdmin{b: b, version: version},
		alarmAdmin:      alarmAdmin{b: b, n: n},
		n:               n,
		addr:            addr,
	}
}

func (a *standaloneAdmin) Self() string { return standaloneName }

func (a *standaloneAdmin) Nodes() []admin.NodeInfo {
	m := membership.Member{Meta: membership.Meta{Name: standaloneName, AMQP: a.n.AMQPAddr().String(), Internal: a.addr}, State: membership.Alive}
	return []admin.NodeInfo{{Member: m, MetadataRole: admin.MetadataRoleLeader}}
}

func (a *standaloneAdmin) MetadataLeader() string { return standaloneName }

func (a *standaloneAdmin) NodeAddr(node string) (string, bool) {
	return a.addr, node == standaloneName
}

func (a *standaloneAdmin) Queues(vhost string, counts bool) []admin.QueueInfo {
	qs := a.n.broker.Queues(vhost)
	out := make([]admin.QueueInfo, len(qs))
	for i, q := range qs {
		rec := q.Record
		out[i] = admin.QueueInfo{Vhost: rec.Vhost, Name: rec.Name, Type: rec.Type,
			Leader: standaloneName, Members: []string{standaloneName}, Online: []string{standaloneName}}
	}
	if counts {
		fillCounts(out, qs)
	}
	return out
}

func (a *standaloneAdmin) QueueGroup(vhost, name string) (string, []string, error) {
	if _, ok := a.n.broker.QueueRecord(vhost, name); !ok {
		return "", nil, fmt.Errorf("queue %q in vhost %q: %w", name, vhost, admin.ErrNotFound)
	}
	return "", nil, errNotClustered
}

func (a *standaloneAdmin) LocalMember(string) (admin.MemberStatus, bool) {
	return admin.MemberStatus{}, false
}
func (a *standaloneAdmin) LocalMembers() map[string]admin.MemberStatus { return nil }
func (a *standaloneAdmin) TransferLeadership(context.Context, string, string) error {
	return errNotClustered
}
func (a *standaloneAdmin) AddMember(context.Context, string, string, string, string) error {
	return errNotClustered
}
func (a *standaloneAdmin) DeleteMember(context.Context, string, string, string, bool) error {
	return errNotClustered
}
func (a *standaloneAdmin) Grow(context.Context, string, string, string, string, string) ([]string, error) {
	return nil, errNotClustered
}
func (a *standaloneAdmin) Shrink(context.Context, string) ([]string, error) {
	return nil, errNotClustered
}

// adminPort is a standalone node's admin service.
type adminPort struct {
	grpc *grpc.Server
	ln   net.Listener
	pool *rpc.Pool
}

// serveAdmin starts a standalone node's admin service on cfg.AdminAddr,
// with TLS when cfg.AdminTLS is set, operators checked by their tags.
func (n *Node) serveAdmin(cfg Config) error {
	if cfg.AdminAddr == "" || n.cluster != nil {
		return nil
	}
	ln, err := net.Listen("tcp", cfg.AdminAddr)
	if err != nil {
		return fmt.Errorf("listen for warrenctl on %s: %w", cfg.AdminAddr, err)
	}
	sec := &rpc.Security{TLS: cfg.AdminTLS}
	p := &adminPort{grpc: grpc.NewServer(sec.ServerOptions()...), ln: ln, pool: rpc.NewPool(sec.DialOptions()...)}
	srv := admin.NewServer(newStandaloneAdmin(n, ln.Addr().String(), cfg.Version), p.pool, n.log)
	srv.SetUsers(operators{n.broker})
	sec.Authorize = srv.Authorize
	srv.Register(p.grpc)
	go p.grpc.Serve(ln)
	n.admin = p
	return nil
}

// AdminAddr is where a standalone node serves warrenctl, nil without.
func (n *Node) AdminAddr() net.Addr {
	if n.admin == nil {
		return nil
	}
	return n.admin.ln.Addr()
}

func (p *adminPort) close() error {
	if p == nil {
		return nil
	}
	p.grpc.Stop()
	return errors.Join(p.pool.Close())
}

var _ admin.Backend = (*standaloneAdmin)(nil)
