# Bub on NATS. `make run` runs the main job on the embedded default;
# `make test` passes the tests. See README.md.

GO       ?= go
BIN      := $(CURDIR)/bin
PKGS     := ./...
MESSAGE  ?= Hello from bub
FUZZTIME ?= 10s

.PHONY: all build run up test test-short lint fuzz bench clean

all: build

## build: compile every binary into ./bin
build:
	CGO_ENABLED=0 $(GO) build -trimpath -o $(BIN)/ ./cmd/...

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

## fuzz: run every fuzz target briefly (FUZZTIME each)
fuzz:
	@set -e; for pkg in $$($(GO) list $(PKGS)); do \
	  for f in $$($(GO) test -list '^Fuzz' $$pkg 2>/dev/null | grep '^Fuzz' || true); do \
	    echo "fuzz $$pkg $$f"; $(GO) test -run '^$$' -fuzz "^$$f$$" -fuzztime $(FUZZTIME) $$pkg; \
	  done; \
	done

## bench: go benchmarks of the hot paths
bench:
	$(GO) test -run '^$$' -bench . -benchmem -benchtime 3x $(PKGS)

clean:
	rm -rf $(BIN)
