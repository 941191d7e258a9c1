package management

// The endpoints fall into groups, one type each over the shared Server
// (authentication, vhost visibility, the AMQP session and the listings
// several groups use).
type (
	overviewAPI    struct{ *Server } // overview, whoami, nodes
	accessAPI      struct{ *Server } // vhosts, users, permissions
	exchangeAPI    struct{ *Server } // exchanges, publish, bindings
	queueAPI       struct{ *Server } // queues, get, purge, replicas, rebalance
	clientAPI      struct{ *Server } // connections, channels, consumers
	definitionsAPI struct{ *Server } // definitions, policies
	healthAPI      struct{ *Server } // health checks
)
