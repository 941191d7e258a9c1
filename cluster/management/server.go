package management

import (
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/warrenmq/warren/amqp/server"
	"github.com/warrenmq/warren/cluster/admin"
)

// Config is what a node gives its management API.
type Config struct {
	// Admin is the node's admin service, called in-process.
	Admin *admin.Server
	// Users checks the callers' passwords and tells their tags and vhosts.
	Users admin.Users
	// AMQPAddr is the node's AMQP listener: what the API does as a
	// client (declare, bind, publish, get) it does there, logged in as
	// the caller.
	AMQPAddr string
	// Version is Warren's, reported as the product version.
	Version string
	// ClusterName is the cluster's name as AMQP clients see it.
	ClusterName func() string
	// Listeners are the node's listeners, for the overview and the
	// port and protocol health checks; the management listener included.
	Listeners []Listener
	// LoginFailureDelay slows the next logins from an address after a
	// failed one, as the AMQP listener does (server.LoginThrottle); 0 is
	// off.
	LoginFailureDelay time.Duration
	Log               *slog.Logger
}

// Listener is one port the node listens on.
type Listener struct {
	// Protocol as RabbitMQ names it: amqp, amqp/ssl, http, https.
	Protocol string
	IP       string
	Port     int
}

// Server is a node's management API, an http.Handler.
type Server struct {
	cfg Config
	mux router
	log *slog.Logger
	// logins throttles failed logins per source address.
	logins *server.LoginThrottle
}

// New returns the management API of the node cfg describes.
func New(cfg Config) *Server {
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if cfg.ClusterName == nil {
		cfg.ClusterName = func() string { return "warren" }
	}
	s := &Server{cfg: cfg, log: cfg.Log.With("component", "management"), logins: server.NewLoginThrottle(cfg.LoginFailureDelay)}
	s.routes()
	return s
}

// ServeHTTP implements http.Handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := s.mux.match(r)
	if h == nil {
		writeError(w, notFound())
		return
	}
	h.ServeHTTP(w, r)
}

// handlerFunc answers one method of one path for an authenticated
// caller; the error it returns is the answer when it wrote none.
type handlerFunc func(w http.ResponseWriter, r *http.Request, c *caller) error

// methods are a path's handlers by HTTP method.
type methods map[string]handlerFunc

func (s *Server) route(pattern string, m methods) { s.mux.handle(pattern, s.dispatch(m)) }

// dispatch checks the method (405 before anything else, as RabbitMQ's
// REST layer does), then the caller, then runs the handler.
func (s *Server) dispatch(m methods) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		method := r.Method
		if method == http.MethodHead {
			method = http.MethodGet
		}
		h, ok := m[method]
		if !ok {
			allow := make([]string, 0, len(m))
			for k := range m {
				allow = append(allow, k)
			}
			slices.Sort(allow)
			w.Header().Set("Allow", strings.Join(allow, ", "))
			s.log.Warn("management request refused: method not allowed", "method", r.Method, "path", r.URL.Path, "remote", r.RemoteAddr)
			writeJSON(w, http.StatusMethodNotAllowed, map[string]string{"error": "Method Not Allowed", "reason": r.Method + " is not allowed here; allowed: " + strings.Join(allow, ", ")})
			return
		}
		c, err := s.authenticate(r)
		if err != nil {
			s.log.Warn("management request refused", "method", r.Method, "path", r.URL.Path, "remote", r.RemoteAddr, "err", err)
			writeError(w, err)
			return
		}
		start := time.Now()
		r = r.WithContext(callContext(r.Context(), c))
		err = h(w, r, c)
		if err != nil {
			s.log.Warn("management request failed", "method", r.Method, "path", r.URL.Path, "user", c.name, "remote", r.RemoteAddr, "err", err)
			writeError(w, err)
			return
		}
		if method != http.MethodGet {
			s.log.Info("management change", "method", r.Method, "path", r.URL.Path, "user", c.name, "remote", r.RemoteAddr, "took", time.Since(start))
		}
	})
}

// adminError is the HTTP answer for an admin service error.
func adminError(err error) error {
	st := status.Convert(err)
	switch st.Code() {
	case codes.NotFound:
		return notFound()
	case codes.InvalidArgument, codes.FailedPrecondition, codes.AlreadyExists:
		return badRequest("%s", st.Message())
	case codes.PermissionDenied, codes.Unauthenticated:
		return notAuthorised(st.Message())
	case codes.Unavailable, codes.DeadlineExceeded:
		return unavailable("%s", st.Message())
	}
	return internalError(err)
}

func (s *Server) routes() {
	ov, ac, ex, qu := overviewAPI{s}, accessAPI{s}, exchangeAPI{s}, queueAPI{s}
	cl, df, he := clientAPI{s}, definitionsAPI{s}, healthAPI{s}
	s.route("/api/overview", methods{"GET": ov.getOverview})
	s.route("/api/whoami", methods{"GET": ov.getWhoami})
	s.route("/api/cluster-name", methods{"GET": ov.getClusterName})
	s.route("/api/nodes", methods{"GET": ov.listNodes})
	s.route("/api/nodes/{node}", methods{"GET": ov.getNode})

	s.route("/api/vhosts", methods{"GET": ac.listVhosts})
	s.route("/api/vhosts/{vhost}", methods{"GET": ac.getVhost, "PUT": ac.putVhost, "DELETE": ac.deleteVhost})
	s.route("/api/vhosts/{vhost}/permissions", methods{"GET": ac.listVhostPermissions})
	s.route("/api/users", methods{"GET": ac.listUsers})
	s.route("/api/users/{user}", methods{"GET": ac.getUser, "PUT": ac.putUser, "DELETE": ac.deleteUser})
	s.route("/api/users/{user}/permissions", methods{"GET": ac.listUserPermissions})
	s.route("/api/permissions", methods{"GET": ac.listPermissions})
	s.route("/api/permissions/{vhost}/{user}", methods{"GET": ac.getPermission, "PUT": ac.putPermission, "DELETE": ac.deletePermission})
	s.route("/api/vhost-limits", methods{"GET": ac.listLimits("vhost")})
	s.route("/api/vhost-limits/{vhost}", methods{"GET": ac.listLimits("vhost")})
	s.route("/api/vhost-limits/{vhost}/{limit}", methods{"PUT": ac.putLimit("vhost"), "DELETE": ac.deleteLimit("vhost")})
	s.route("/api/user-limits", methods{"GET": ac.listLimits("user")})
	s.route("/api/user-limits/{user}", methods{"GET": ac.listLimits("user")})
	s.route("/api/user-limits/{user}/{limit}", methods{"PUT": ac.putLimit("user"), "DELETE": ac.deleteLimit("user")})
	s.route("/api/topic-permissions", methods{"GET": ac.listTopicPermissions})
	s.route("/api/topic-permissions/{vhost}/{user}", methods{"GET": ac.getTopicPermission, "PUT": ac.putTopicPermission, "DELETE": ac.getTopicPermission})

	s.route("/api/exchanges", methods{"GET": ex.listExchanges})
	s.route("/api/exchanges/{vhost}", methods{"GET": ex.listExchanges})
	s.route("/api/exchanges/{vhost}/{name}", methods{"GET": ex.getExchange, "PUT": ex.putExchange, "DELETE": ex.deleteExchange})
	s.route("/api/exchanges/{vhost}/{name}/publish", methods{"POST": ex.publish})
	s.route("/api/exchanges/{vhost}/{name}/bindings/source", methods{"GET": ex.listExchangeBindings("source")})
	s.route("/api/exchanges/{vhost}/{name}/bindings/destination", methods{"GET": ex.listExchangeBindings("destination")})

	s.route("/api/queues", methods{"GET": qu.listQueues})
	s.route("/api/queues/{vhost}", methods{"GET": qu.listQueues})
	s.route("/api/queues/{vhost}/{name}", methods{"GET": qu.getQueue, "PUT": qu.putQueue, "DELETE": qu.deleteQueue})
	s.route("/api/queues/{vhost}/{name}/contents", methods{"DELETE": qu.purgeQueue})
	s.route("/api/queues/{vhost}/{name}/get", methods{"POST": qu.getMessages})
	s.route("/api/queues/{vhost}/{name}/bindings", methods{"GET": ex.listQueueBindings})
	s.route("/api/queues/quorum/{vhost}/{name}/replicas/add", methods{"POST": qu.addReplica})
	s.route("/api/queues/quorum/{vhost}/{name}/replicas/delete", methods{"DELETE": qu.deleteReplica})
	s.route("/api/rebalance/queues", methods{"POST": qu.rebalance})

	s.route("/api/bindings", methods{"GET": ex.listBindings})
	s.route("/api/bindings/{vhost}", methods{"GET": ex.listBindings})
	s.route("/api/bindings/{vhost}/e/{source}/{dtype}/{destination}", methods{"GET": ex.listBindingsBetween, "POST": ex.postBinding})
	s.route("/api/bindings/{vhost}/e/{source}/{dtype}/{destination}/{props}", methods{"GET": ex.getBinding, "DELETE": ex.deleteBinding})

	s.route("/api/connections", methods{"GET": cl.listConnections})
	s.route("/api/connections/{name}", methods{"GET": cl.getConnection, "DELETE": cl.closeConnection})
	s.route("/api/connections/{name}/channels", methods{"GET": cl.listConnectionChannels})
	s.route("/api/vhosts/{vhost}/connections", methods{"GET": cl.listVhostConnections})
	s.route("/api/channels", methods{"GET": cl.listChannels})
	s.route("/api/vhosts/{vhost}/channels", methods{"GET": cl.listVhostChannels})
	s.route("/api/consumers", methods{"GET": cl.listConsumers})
	s.route("/api/consumers/{vhost}", methods{"GET": cl.listConsumers})

	s.route("/api/definitions", methods{"GET": df.getDefinitions, "POST": df.postDefinitions})
	s.route("/api/definitions/{vhost}", methods{"GET": df.getVhostDefinitions, "POST": df.postVhostDefinitions})

	s.route("/api/policies", methods{"GET": df.listPolicies(false)})
	s.route("/api/policies/{vhost}", methods{"GET": df.listPolicies(false)})
	s.route("/api/policies/{vhost}/{name}", methods{"GET": df.getPolicy(false), "PUT": df.putPolicy(false), "DELETE": df.deletePolicy(false)})
	s.route("/api/operator-policies", methods{"GET": df.listPolicies(true)})
	s.route("/api/operator-policies/{vhost}", methods{"GET": df.listPolicies(true)})
	s.route("/api/operator-policies/{vhost}/{name}", methods{"GET": df.getPolicy(true), "PUT": df.putPolicy(true), "DELETE": df.deletePolicy(true)})

	s.route("/api/health/checks/alarms", methods{"GET": he.checkAlarms})
	s.route("/api/health/checks/local-alarms", methods{"GET": he.checkLocalAlarms})
	s.route("/api/health/checks/node-is-quorum-critical", methods{"GET": he.checkQuorumCritical})
	s.route("/api/health/checks/virtual-hosts", methods{"GET": he.checkVirtualHosts})
	s.route("/api/health/checks/port-listener/{port}", methods{"GET": he.checkPortListener})
	s.route("/api/health/checks/protocol-listener/{protocol}", methods{"GET": he.checkProtocolListener})
	s.route("/api/health/checks/ready-to-serve-clients", methods{"GET": he.checkReady})
}
