# walrelay — see README.md "Develop".

GO ?= go

.PHONY: build test lint clean

build:
	$(GO) build -o bin/walrelay ./cmd/walrelay

# One PostgreSQL and one Kafka for every package (test/cmd/testbed).
test:
	$(GO) run ./test/cmd/testbed -- $(GO) test -count=1 -timeout 20m ./...

lint:
	$(GO) vet ./...
	@unformatted=$$(gofmt -l .); \
	if [ -n "$$unformatted" ]; then echo "gofmt -w needed:"; echo "$$unformatted"; exit 1; fi

clean:
	rm -rf bin

# Quick start: PostgreSQL and Kafka from the test bed, walrelay between them,
# sample orders written and read back.
.PHONY: demo
demo:
	$(GO) run ./test/cmd/testbed -- $(GO) run ./test/cmd/demo
