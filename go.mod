module github.com/warrenmq/warren

go 1.26

require (
	github.com/BurntSushi/toml v1.6.0
	github.com/rabbitmq/amqp091-go v1.16.0
	go.etcd.io/bbolt v1.4.3
	pgregory.net/rapid v1.3.0
)

require golang.org/x/sys v0.29.0
