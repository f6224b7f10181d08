# Bub on NATS. `make run` runs the main job on the embedded default;
# `make test` passes the tests. See README.md.

GO       ?= go
BIN      := $(CURDIR)/bin
PKGS     := ./...
MESSAGE  ?= Hello from bub
FUZZTIME ?= 10s
DOCKER   ?= docker
BUB_IMAGE        ?= bub/bub:local
LOCAL_NATS_IMAGE ?= bub/nats:local

.PHONY: all build run up test test-short lint fuzz bench bench-quick bench-go chaos clean images nats-image e2e-compose e2e-cluster

all: build

## build: compile every binary (commands and example interceptors) into ./bin
build:
	CGO_ENABLED=0 $(GO) build -trimpath -o $(BIN)/ ./cmd/... ./examples/...

## run: send one message through the whole pipeline on an embedded NATS and print the reply
run: build
	$(BIN)/bub run "$(MESSAGE)"

## up: serve ingress + worker + recorder on an embedded NATS until Ctrl-C
up: build
	$(BIN)/bub up

## test: the whole suite with the race detector (end-to-end tests use ./bin)
test: build
	BUB_BIN_DIR=$(BIN) $(GO) test -race -timeout 30m -count=1 $(PKGS)

## test-short: unit tests only, no race detector
test-short:
	$(GO) test -short -count=1 $(PKGS)

## lint: gofmt and go vet
lint:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet $(PKGS)

## fuzz: run every fuzz target briefly (FUZZTIME each: a duration such as 10s, or a count such as 20000x)
fuzz:
	@set -e; for dir in $$(grep -rl --include='*_test.go' '^func Fuzz' . | xargs -n1 dirname | sort -u); do \
	  for f in $$(grep -h '^func Fuzz' $$dir/*_test.go | sed 's/^func \(Fuzz[A-Za-z0-9_]*\).*/\1/'); do \
	    echo "fuzz $$dir $$f"; $(GO) test -run '^$$' -fuzz "^$$f$$" -fuzztime $(FUZZTIME) $$dir; \
	  done; \
	done

## bench: measure every figure beside its limit measured in the same run and write BENCHMARKS.md (bub bench; BENCH_FLAGS=--only=P1,P3 …)
bench: build
	$(BIN)/bub bench $(BENCH_FLAGS) --out BENCHMARKS.md

## bench-quick: the main table in about three minutes, printed (not written to BENCHMARKS.md)
bench-quick: build
	$(BIN)/bub bench --quick $(BENCH_FLAGS) --out -

## bench-go: the Go micro-benchmarks of the hot paths
bench-go:
	$(GO) test -run '^$$' -bench . -benchmem -benchtime 3x $(PKGS)

## images: the service image $(BUB_IMAGE), FROM scratch with every static binary (deploy/Dockerfile)
images:
	rm -rf $(BIN)/image && mkdir -p $(BIN)/image/workspace $(BIN)/image/data $(BIN)/image/tmp
	CGO_ENABLED=0 GOOS=linux $(GO) build -trimpath -ldflags='-s -w' -o $(BIN)/image/ ./cmd/... ./examples/interceptors/policy
	cp /etc/ssl/certs/ca-certificates.crt $(BIN)/image/ 2>/dev/null || : > $(BIN)/image/ca-certificates.crt
	$(DOCKER) build -q -f deploy/Dockerfile -t $(BUB_IMAGE) $(BIN)/image

## nats-image: $(LOCAL_NATS_IMAGE), nats-server built from the pinned Go module, FROM scratch (no registry needed)
nats-image:
	rm -rf $(BIN)/nats-image && mkdir -p $(BIN)/nats-image
	CGO_ENABLED=0 GOOS=linux $(GO) build -trimpath -ldflags='-s -w' -o $(BIN)/nats-image/nats-server github.com/nats-io/nats-server/v2
	$(DOCKER) build -q -f deploy/natsserver/Dockerfile -t $(LOCAL_NATS_IMAGE) $(BIN)/nats-image

## e2e-compose: the compose cluster end to end (images, 100 messages, 3 workers, one killed); NATS_IMAGE picks the server image
e2e-compose: images nats-image
	BUB_IMAGE=$(BUB_IMAGE) NATS_IMAGE=$(or $(NATS_IMAGE),$(LOCAL_NATS_IMAGE)) BUB_BIN_DIR=$(BIN)/image \
	  $(GO) test -tags compose -count=1 -timeout 6m -v -run '^TestComposeCluster$$' ./e2e/compose/

## e2e-cluster: the compose cluster profile (3 NATS servers, R3) under load while servers are killed, partitioned, rolled and replaced (BUB_CLUSTER_TURNS=500 BUB_CLUSTER_SESSIONS=50 per scenario)
e2e-cluster: images nats-image
	BUB_IMAGE=$(BUB_IMAGE) NATS_IMAGE=$(or $(NATS_IMAGE),$(LOCAL_NATS_IMAGE)) BUB_BIN_DIR=$(BIN)/image \
	  $(GO) test -tags compose -count=1 -timeout 40m -v -run '^TestComposeClusterFaults$$' ./e2e/compose/

## chaos: the chaos suite on the built binaries (1,000 turns over 50 sessions; CI: BUB_CHAOS_TURNS=200 BUB_CHAOS_SESSIONS=10 BUB_CHAOS_RATE=25)
chaos: build
	$(GO) vet -tags chaos ./chaos/
	BUB_BIN_DIR=$(BIN) $(GO) test -tags chaos -count=1 -timeout 30m -v -run '^TestChaos' ./chaos/

clean:
	rm -rf $(BIN)
