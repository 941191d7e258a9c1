package broker

import (
	"encoding/json"
	"fmt"
	"strings"
)

// Definitions is RabbitMQ's definitions document, as rabbitmqctl
// export_definitions writes it and import_definitions reads it (and the
// management API's /api/definitions): users with their password hashes,
// vhosts, permissions, policies (operator policies among the parameters),
// and the durable queues, exchanges and bindings. An operator moves a
// RabbitMQ setup to Warren with it, or back. Fields Warren has no use for
// are kept as they came, so a document survives a round trip through its
// types.
type Definitions struct {
	ProductName      string          `json:"product_name,omitempty"`
	ProductVersion   string          `json:"product_version,omitempty"`
	RabbitVersion    string          `json:"rabbit_version,omitempty"`
	RabbitMQVersion  string          `json:"rabbitmq_version,omitempty"`
	Users            []DefUser       `json:"users"`
	Vhosts           []DefVhost      `json:"vhosts"`
	Permissions      []DefPermission `json:"permissions"`
	TopicPermissions []any           `json:"topic_permissions"`
	Parameters       []DefParameter  `json:"parameters"`
	GlobalParameters []any           `json:"global_parameters"`
	Policies         []DefPolicy     `json:"policies"`
	Queues           []DefQueue      `json:"queues"`
	Exchanges        []DefExchange   `json:"exchanges"`
	Bindings         []DefBinding    `json:"bindings"`
}

// DefUser is a user. Tags are a list, or (RabbitMQ before 3.9) one
// comma-separated string.
type DefUser struct {
	Name             string          `json:"name"`
	PasswordHash     string          `json:"password_hash"`
	HashingAlgorithm string          `json:"hashing_algorithm,omitempty"`
	Tags             defTags         `json:"tags"`
	Limits           json.RawMessage `json:"limits,omitempty"`
}

// sha256Hashing is the one password hashing Warren checks
// (HashPassword); RabbitMQ's default since 3.6.
const sha256Hashing = "rabbit_password_hashing_sha256"

type defTags []string

func (t *defTags) UnmarshalJSON(b []byte) error {
	var list []string
	if err := json.Unmarshal(b, &list); err == nil {
		*t = list
		return nil
	}
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("tags: a list or a comma-separated string: %w", err)
	}
	*t = nil
	for _, x := range strings.Split(s, ",") {
		if x = strings.TrimSpace(x); x != "" {
			*t = append(*t, x)
		}
	}
	return nil
}

// DefVhost is a vhost. Its default queue type is under metadata in
// RabbitMQ 3.11 and later, at the top level in some tools' documents.
type DefVhost struct {
	Name             string       `json:"name"`
	Description      string       `json:"description,omitempty"`
	Tags             defTags      `json:"tags,omitempty"`
	DefaultQueueType string       `json:"default_queue_type,omitempty"`
	Metadata         *vhostMetada `json:"metadata,omitempty"`
	// Limits are its limits: an object as RabbitMQ 4.x writes them
	// ({"max-queues": 10}), or pairs as 3.x does ([["max-queues", 10]]);
	// both also write them as a vhost-limits parameter.
	Limits json.RawMessage `json:"limits,omitempty"`
}

// limits are v's limits, none if the document gives none.
func (v DefVhost) limits() (map[string]int64, error) { return readLimits(v.Limits, ParseVhostLimits) }

// readLimits reads a vhost's or a user's limits from a definitions
// document: an object as RabbitMQ 4.x writes it, or [name, value] pairs
// as 3.x does; none for nothing, null, [] or {}.
func readLimits(raw json.RawMessage, parse func(string) (map[string]int64, error)) (map[string]int64, error) {
	var pairs [][2]json.RawMessage
	if len(raw) > 0 && raw[0] == '[' {
		if err := json.Unmarshal(raw, &pairs); err != nil {
			return nil, invalidAccess("limits: a JSON object, or a list of [name, value] pairs: %v", err)
		}
		obj := map[string]json.RawMessage{}
		for _, p := range pairs {
			var k string
			if err := json.Unmarshal(p[0], &k); err != nil {
				return nil, invalidAccess("limits: a limit's name must be a string: %s", p[0])
			}
			obj[k] = p[1]
		}
		raw, _ = json.Marshal(obj)
	}
	if len(raw) == 0 || string(raw) == "null" || string(raw) == "{}" {
		return nil, nil
	}
	return parse(string(raw))
}

// vhostMetada's tags are a list, or "" (RabbitMQ 3.10 writes both).
type vhostMetada struct {
	Description      string  `json:"description"`
	Tags             defTags `json:"tags"`
	DefaultQueueType string  `json:"default_queue_type,omitempty"`
}

func (v DefVhost) queueType() string {
	if v.Metadata != nil && v.Metadata.DefaultQueueType != "" {
		return v.Metadata.DefaultQueueType
	}
	return v.DefaultQueueType
}

// DefPermission is a user's access to a vhost.
type DefPermission struct {
	User      string `json:"user"`
	Vhost     string `json:"vhost"`
	Configure string `json:"configure"`
	Write     string `json:"write"`
	Read      string `json:"read"`
}

// DefPolicy is a policy.
type DefPolicy struct {
	Vhost      string          `json:"vhost"`
	Name       string          `json:"name"`
	Pattern    string          `json:"pattern"`
	ApplyTo    string          `json:"apply-to"`
	Definition json.RawMessage `json:"definition"`
	Priority   int             `json:"priority"`
}

// DefParameter is a runtime parameter: Warren takes operator policies
// (component operator_policy, its value a policy without vhost and name)
// and vhost limits (component vhost-limits), and reports the others
// (federation, shovels) as not imported.
type DefParameter struct {
	Vhost     string          `json:"vhost"`
	Component string          `json:"component"`
	Name      string          `json:"name"`
	Value     json.RawMessage `json:"value"`
}

// DefQueue is a durable queue; its type is its arguments' x-queue-type
// (RabbitMQ 3.10 and later repeat it as type).
type DefQueue struct {
	Name       string          `json:"name"`
	Vhost      string          `json:"vhost"`
	Type       string          `json:"type,omitempty"`
	Durable    bool            `json:"durable"`
	AutoDelete bool            `json:"auto_delete"`
	Arguments  json.RawMessage `json:"arguments"`
}

// DefExchange is a durable exchange.
type DefExchange struct {
	Name       string          `json:"name"`
	Vhost      string          `json:"vhost"`
	Type       string          `json:"type"`
	Durable    bool            `json:"durable"`
	AutoDelete bool            `json:"auto_delete"`
	Internal   bool            `json:"internal"`
	Arguments  json.RawMessage `json:"arguments"`
}

// DefBinding binds an exchange to a queue or to another exchange.
type DefBinding struct {
	Source          string          `json:"source"`
	Vhost           string          `json:"vhost"`
	Destination     string          `json:"destination"`
	DestinationType string          `json:"destination_type"`
	RoutingKey      string          `json:"routing_key"`
	Arguments       json.RawMessage `json:"arguments"`
}

// ImportReport is what an import did: how many of each kind it created or
// updated, and each item it could not take, with the reason.
type ImportReport struct {
	Imported map[string]int // by kind: users, vhosts, permissions, ...
	Problems []string
}

func (r *ImportReport) problem(format string, args ...any) {
	r.Problems = append(r.Problems, fmt.Sprintf(format, args...))
}
