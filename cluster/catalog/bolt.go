package catalog

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strconv"
	"time"

	bolt "go.etcd.io/bbolt"
)

// BoltStore is a Store in one bbolt file: a bucket per record kind, JSON
// values. Metadata changes are rare (declares, binds), so clarity wins over
// compactness here.
type BoltStore struct {
	db *bolt.DB
}

var (
	bucketVhosts      = []byte("vhosts")
	bucketUsers       = []byte("users")
	bucketPermissions = []byte("permissions")
	bucketExchanges   = []byte("exchanges")
	bucketBindings    = []byte("bindings")
	bucketQueues      = []byte("queues")
	bucketPolicies    = []byte("policies")
	bucketNodes       = []byte("nodes")
	allBuckets        = [][]byte{bucketVhosts, bucketUsers, bucketPermissions, bucketExchanges, bucketBindings, bucketQueues, bucketPolicies, bucketNodes}
)

// OpenBolt opens (creating if needed) the metadata file in dir.
func OpenBolt(dir string) (*BoltStore, error) {
	path := filepath.Join(dir, "metadata.db")
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: 5 * time.Second})
	if err != nil {
		return nil, fmt.Errorf("open metadata store %s: %w", path, err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		for _, b := range allBuckets {
			if _, err := tx.CreateBucketIfNotExists(b); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("create metadata buckets: %w", err)
	}
	return &BoltStore{db: db}, nil
}

// Key joins the parts that identify a record with NUL, which AMQP names
// (short strings of UTF-8) never contain in practice and which keeps keys
// of one vhost adjacent. The replicated store (cluster/metaraft) keys its
// records the same way.
func Key(parts ...string) []byte {
	n := 0
	for _, p := range parts {
		n += len(p) + 1
	}
	b := make([]byte, 0, n)
	for i, p := range parts {
		if i > 0 {
			b = append(b, 0)
		}
		b = append(b, p...)
	}
	return b
}

// PolicyKey is a policy's key: its vhost, its kind (policies and operator
// policies are separate namespaces, as in RabbitMQ) and its name.
func PolicyKey(p *Policy) []byte {
	kind := "policy"
	if p.Operator {
		kind = "operator_policy"
	}
	return Key(p.Vhost, kind, p.Name)
}

func (c Change) location() (bucket, k []byte, v any) {
	switch {
	case c.Vhost != nil:
		return bucketVhosts, Key(c.Vhost.Name), c.Vhost
	case c.User != nil:
		return bucketUsers, Key(c.User.Name), c.User
	case c.Permission != nil:
		return bucketPermissions, Key(c.Permission.User, c.Permission.Vhost), c.Permission
	case c.Exchange != nil:
		return bucketExchanges, Key(c.Exchange.Vhost, c.Exchange.Name), c.Exchange
	case c.Binding != nil:
		b := c.Binding
		return bucketBindings, Key(b.Vhost, b.Source, strconv.Itoa(int(b.Kind)), b.Destination, b.RoutingKey, string(b.Arguments)), b
	case c.Queue != nil:
		return bucketQueues, Key(c.Queue.Vhost, c.Queue.Name), c.Queue
	case c.Policy != nil:
		return bucketPolicies, PolicyKey(c.Policy), c.Policy
	case c.Node != nil:
		return bucketNodes, Key(c.Node.Name), c.Node
	}
	return nil, nil, nil
}

// Apply writes changes in one transaction (one fsync).
func (s *BoltStore) Apply(changes ...Change) error {
	if len(changes) == 0 {
		return nil
	}
	return s.db.Update(func(tx *bolt.Tx) error {
		for _, c := range changes {
			bucket, k, v := c.location()
			if bucket == nil {
				return fmt.Errorf("metadata: empty change")
			}
			b := tx.Bucket(bucket)
			if c.IfAbsent && b.Get(k) != nil {
				return ErrExists
			}
			if c.Delete {
				if err := b.Delete(k); err != nil {
					return fmt.Errorf("delete %s record: %w", bucket, err)
				}
				continue
			}
			data, err := json.Marshal(v)
			if err != nil {
				return fmt.Errorf("encode %s record: %w", bucket, err)
			}
			if err := b.Put(k, data); err != nil {
				return fmt.Errorf("put %s record: %w", bucket, err)
			}
		}
		return nil
	})
}

// Load reads every record.
func (s *BoltStore) Load() (*Snapshot, error) {
	snap := &Snapshot{}
	err := s.db.View(func(tx *bolt.Tx) error {
		if err := loadBucket(tx, bucketVhosts, &snap.Vhosts); err != nil {
			return err
		}
		if err := loadBucket(tx, bucketUsers, &snap.Users); err != nil {
			return err
		}
		if err := loadBucket(tx, bucketPermissions, &snap.Permissions); err != nil {
			return err
		}
		if err := loadBucket(tx, bucketExchanges, &snap.Exchanges); err != nil {
			return err
		}
		if err := loadBucket(tx, bucketBindings, &snap.Bindings); err != nil {
			return err
		}
		if err := loadBucket(tx, bucketQueues, &snap.Queues); err != nil {
			return err
		}
		if err := loadBucket(tx, bucketPolicies, &snap.Policies); err != nil {
			return err
		}
		return loadBucket(tx, bucketNodes, &snap.Nodes)
	})
	if err != nil {
		return nil, fmt.Errorf("load metadata: %w", err)
	}
	return snap, nil
}

func loadBucket[T any](tx *bolt.Tx, bucket []byte, out *[]T) error {
	return tx.Bucket(bucket).ForEach(func(k, v []byte) error {
		var r T
		if err := json.Unmarshal(v, &r); err != nil {
			return fmt.Errorf("decode %s record %q: %w", bucket, k, err)
		}
		*out = append(*out, r)
		return nil
	})
}

// Close closes the file.
func (s *BoltStore) Close() error { return s.db.Close() }
