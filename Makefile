# Warren's Makefile. `make help` lists the targets.

GO        ?= go
BIN       ?= bin
DATA_DIR  ?= ./data
AMQP_ADDR ?= :5672
PROMETHEUS_ADDR ?= 127.0.0.1:15692
MANAGEMENT_ADDR ?= 127.0.0.1:15672
# make run's node is a cluster of one, so that warrenctl (whose default
# --node is 127.0.0.1:25672) reaches it; its name is fixed, not the host's,
# because a member's queues know it by name.
INTERNAL_ADDR ?= 127.0.0.1:25672
GOSSIP_ADDR ?= 127.0.0.1:7946
NODE_NAME ?= warren@localhost
# make run serves AMQPS too, with a development CA and certificate made
# here on first use (docs/security.md shows how to use your own PKI).
AMQPS_ADDR ?= :5671
CERTS_DIR ?= $(DATA_DIR)/certs
SPEC      ?= amqp/internal/specgen/spec/amqp-rabbitmq-0.9.1.json
FUZZTIME  ?= 30s

.DEFAULT_GOAL := help

.PHONY: help
help: ## list the targets
	@grep -hE '^[a-zA-Z_-]+:.*## ' $(MAKEFILE_LIST) | awk 'BEGIN {FS = ":.*## "}; {printf "  %-16s %s\n", $$1, $$2}'

.PHONY: build
build: ## build the binaries into ./bin
	$(GO) build -o $(BIN)/ ./cmd/...

.PHONY: run
run: build dev-certs ## start one node (a cluster of one, for warrenctl): data in ./data, AMQP on 5672 and AMQPS on 5671 (guest/guest from localhost), metrics on 127.0.0.1:15692, the management API on https://127.0.0.1:15672/api/
	$(BIN)/warren --data-dir $(DATA_DIR) --amqp $(AMQP_ADDR) --prometheus-addr $(PROMETHEUS_ADDR) --management-addr $(MANAGEMENT_ADDR) \
		--node-name $(NODE_NAME) --internal-addr $(INTERNAL_ADDR) --gossip-addr $(GOSSIP_ADDR) \
		--amqps $(AMQPS_ADDR) --tls-ca $(CERTS_DIR)/ca.pem \
		--tls-cert $(CERTS_DIR)/$(subst @,_,$(NODE_NAME)).pem --tls-key $(CERTS_DIR)/$(subst @,_,$(NODE_NAME))-key.pem \
		--cluster-tls=false

.PHONY: dev-certs
dev-certs: build ## a development CA in $(CERTS_DIR) with a certificate for $(NODE_NAME) and a client certificate for guest (made once)
	@[ -f $(CERTS_DIR)/ca.pem ] || $(BIN)/warrenctl certs init --dir $(CERTS_DIR) --name "Warren development CA"
	@[ -f $(CERTS_DIR)/$(subst @,_,$(NODE_NAME)).pem ] || $(BIN)/warrenctl certs node $(NODE_NAME) --dir $(CERTS_DIR)
	@[ -f $(CERTS_DIR)/guest.pem ] || $(BIN)/warrenctl certs client guest --dir $(CERTS_DIR)

.PHONY: image
image: ## the Docker image warren:local (static binaries on scratch) that deploy/docker's clusters run
	mkdir -p $(BIN)/image
	CGO_ENABLED=0 $(GO) build -trimpath -o $(BIN)/image/ ./cmd/warren ./cmd/warrenctl
	docker build -q -t warren:local -f deploy/docker/Dockerfile $(BIN)/image

.PHONY: deploy-check
deploy-check: build image ## deploy/docker end to end: a 3-node compose cluster with mutual TLS (certificates from deploy/docker/make-certs.sh), confirms across nodes, AMQPS with EXTERNAL, a docker kill of a queue leader (Docker, docker-compose)
	cd deploy/docker && $(GO) test -tags docker -count=1 -v .

.PHONY: test
# go test prints one line per package with its time ("ok <package> 12.3s").
# The slowest packages, cluster/node and cmd/warren, take about 3 minutes
# each under -race on two cores when run alone; 15 minutes leaves room for
# go test running packages side by side and for a loaded machine.
test: ## vet, then every test with the race detector (fuzz seed corpora included), one line per package with its time
	$(GO) vet ./...
	$(GO) test -race -count=1 -timeout 15m ./...

.PHONY: test-slow
test-slow: ## the slow tests too (1,000 quorum queues on three in-process nodes); minutes
	WARREN_SLOW_TESTS=1 $(GO) test -count=1 -timeout 30m -run 'ThousandQueues' -v ./cluster/node/

.PHONY: jepsen-smoke
jepsen-smoke: ## the chaos harness's smoke run, as CI runs it (jepsen/ TestChaos): 3 nodes, every workload, most faults and operations (jepsen/smoke.go), about 4 minutes; needs root, ip, nft, iptables
	WARREN_CHAOS_TESTS=require $(GO) test -count=1 -timeout 12m -run '^TestChaos$$' -v ./jepsen/

.PHONY: test-chaos
test-chaos: ## the smoke run without root: the faults that cut links left out
	WARREN_CHAOS_TESTS=1 $(GO) test -count=1 -timeout 12m -run '^TestChaos$$' -v ./jepsen/

.PHONY: test-short
test-short: ## the tests without the race detector, quicker while editing
	$(GO) test -count=1 ./...

.PHONY: bench
bench: bench-micro ## micro-benchmarks, then warren-perf against RabbitMQ 3.10.8: 1 node (quorum, 1 KB and 16 B, unlimited and sustained) and 3 nodes (see perf-cluster)
	QUEUE_TYPE=quorum CONFIRM=256 PREFETCH=256 SIZE=1000 ./scripts/perf-compare.sh
	QUEUE_TYPE=quorum CONFIRM=256 PREFETCH=256 SIZE=16 ./scripts/perf-compare.sh
	SIZE=1000 ./scripts/perf-sustained.sh
	SIZE=16 ./scripts/perf-sustained.sh
	./scripts/perf-cluster.sh

.PHONY: perf-sustained
perf-sustained: ## the highest rate one quorum queue sustains with its consumer keeping pace, Warren and a 1-node RabbitMQ (SIZE=1000)
	./scripts/perf-sustained.sh

.PHONY: bench-micro
bench-micro: ## micro-benchmarks of the hot paths (frames, tables, queue engines, the quorum state machine, the Raft transport)
	$(GO) test -run '^$$' -bench . -benchmem ./amqp/... ./cluster/... ./raftq/...

.PHONY: declare-compare
declare-compare: build ## time and memory to declare 1,000 quorum queues: 3-node Warren vs 3-node RabbitMQ
	./scripts/declare-compare.sh

.PHONY: perf-cluster
perf-cluster: build ## 3-node Warren vs 3-node RabbitMQ: 1 queue and 10 queues (full speed and sustained), 1,000 msg/s (latency, CPU per message), declaring 1,000 queues (PARTS=...)
	./scripts/perf-cluster.sh

FUZZ_TARGETS = ./amqp/wire/:FuzzReadFrame ./amqp/wire/:FuzzDecodeMethod ./amqp/wire/:FuzzDecodeTable \
	./amqp/wire/:FuzzDecodeContentHeader ./raftq/:FuzzDecode ./raftq/:FuzzRestore ./raftq/wal/:FuzzReplay ./raftq/replica/:FuzzRestoreSnapshot

.PHONY: fuzz
fuzz: ## run each fuzz target for FUZZTIME (default 30s); their seed corpora run in make test
	@for pt in $(FUZZ_TARGETS); do \
		pkg=$${pt%%:*}; t=$${pt##*:}; echo "== $$pkg $$t"; \
		$(GO) test -run '^$$' -fuzz "^$$t$$" -fuzztime $(FUZZTIME) $$pkg || exit 1; \
	done

.PHONY: lint
lint: ## gofmt check, go vet, and go mod tidy check
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { gofmt -l $$(git ls-files '*.go'); echo "gofmt needed"; exit 1; }
	$(GO) vet ./...
	$(GO) mod tidy -diff

.PHONY: generate
generate: ## regenerate the AMQP method code from the spec
	$(GO) run ./amqp/internal/specgen -spec $(SPEC) -out amqp/wire/spec_gen.go

PROTOS = $(wildcard proto/*/*.proto)

# protoc-gen runs protoc with the pinned Go plugins, writing under $(1).
define protoc-gen
	@command -v protoc >/dev/null || { echo "protoc missing: apt-get install protobuf-compiler"; exit 1; }
	GOBIN=$(CURDIR)/$(BIN) $(GO) install google.golang.org/protobuf/cmd/protoc-gen-go@v1.36.12
	GOBIN=$(CURDIR)/$(BIN) $(GO) install google.golang.org/grpc/cmd/protoc-gen-go-grpc@v1.5.1
	PATH="$(CURDIR)/$(BIN):$$PATH" protoc --proto_path=proto \
		--go_out=$(1) --go_opt=module=github.com/warrenmq/warren \
		--go-grpc_out=$(1) --go-grpc_opt=module=github.com/warrenmq/warren \
		$(PROTOS)
endef

.PHONY: proto
proto: ## regenerate proto/*/ Go code (needs protoc from Debian's protobuf-compiler; installs the Go plugins)
	$(call protoc-gen,.)

.PHONY: verify
verify: verify-generate verify-proto ## fail if the committed generated code (AMQP methods, protobuf) is stale; needs protoc

.PHONY: verify-generate
verify-generate: ## fail if amqp/wire/spec_gen.go is not what the generator makes of the spec
	@tmp=$$(mktemp -d) && trap 'rm -rf $$tmp' EXIT && \
	$(GO) run ./amqp/internal/specgen -spec $(SPEC) -out $$tmp/spec_gen.go && \
	diff -u amqp/wire/spec_gen.go $$tmp/spec_gen.go || { echo "amqp/wire/spec_gen.go is stale: make generate"; exit 1; }

VERIFY_PROTO_DIR := $(shell mktemp -u -d /tmp/warren-verify-proto.XXXXXX)

.PHONY: verify-proto
verify-proto: ## fail if proto/*/ Go code is not what protoc makes of the .proto files
	mkdir -p $(VERIFY_PROTO_DIR)
	$(call protoc-gen,$(VERIFY_PROTO_DIR))
	@status=0; for f in $$(cd $(VERIFY_PROTO_DIR) && find . -name '*.go'); do \
		diff -u "$$f" "$(VERIFY_PROTO_DIR)/$$f" || { echo "$$f is stale: make proto"; status=1; }; \
	done; \
	for f in $$(find proto -name '*.pb.go'); do \
		[ -f "$(VERIFY_PROTO_DIR)/$$f" ] || { echo "$$f has no .proto: remove it"; status=1; }; \
	done; rm -rf $(VERIFY_PROTO_DIR); exit $$status

N ?= 3

.PHONY: cluster
cluster: build ## start N local nodes (default 3) on ports 5672+i, 25672+i, 7946+i, metrics 15692+i, management API 15672+i; Ctrl-C stops them
	N=$(N) DATA_DIR=$(DATA_DIR) BIN=$(BIN) ./scripts/cluster.sh

.PHONY: jepsen
jepsen: build ## chaos run: 3 nodes, every fault (partitions need root) and operation for DURATION (default 2m); exit 1 if a confirmed message was lost (jepsen/README.md)
	$(GO) run ./jepsen --warren $(BIN)/warren --warrenctl $(BIN)/warrenctl --duration $(or $(DURATION),2m) $(JEPSEN_FLAGS)

.PHONY: perf-compare
perf-compare: build ## warren-perf against `make run`'s node and a 1-node RabbitMQ (see docs/performance.md)
	./scripts/perf-compare.sh

.PHONY: idle-cost
idle-cost: ## CPU, memory and goroutines of 3 local nodes with N (default 1000) idle quorum queues
	N=$(or $(QUEUES),1000) ./scripts/idle-cost.sh

.PHONY: machine-cost
machine-cost: ## what this machine charges for a log sync and for a request served from idle: the floor under CPU per message
	go run ./scripts/machine-cost --dir $(or $(TMPDIR),/tmp)

.PHONY: write-cost
write-cost: ## what one durable log write costs a Go process here, made seven ways (DIR: the file system to write to)
	go run ./scripts/write-cost --dir $(or $(DIR),$(TMPDIR),/tmp)

.PHONY: rate-cost
rate-cost: ## one quorum queue on 3 local nodes at RATE (default 1000) msg/s: CPU, syscalls and context switches per node
	RATE=$(or $(RATE),1000) ./scripts/rate-cost.sh

.PHONY: rate-ab
rate-ab: ## rate-cost for two builds (A, B: git revisions; empty: the working tree) or settings (A_ENV, B_ENV), alternating ROUNDS (3) rounds
	./scripts/rate-ab.sh

.PHONY: backlog-memory
backlog-memory: ## 1,000,000 x 1 KB messages into one quorum queue, then its RssAnon
	./scripts/backlog-memory.sh

.PHONY: clean
clean: ## remove binaries (not ./data)
	rm -rf $(BIN)
