# lsmcuckoo: cuckoo filters for LSM key-value stores.
GO ?= go
PKGS := ./...

.PHONY: test demo bench report-quick fuzz vet fmt-check

## test: everything CI runs: formatting, vet, unit/integration tests with
## the race detector, and the fuzz targets' seed corpora. Long tests whose
## goroutines are all the test's own (model histories, whole Pebble trees,
## placement digests, sweeps over sizes and budgets) skip themselves under
## the race detector (internal/race), which has nothing to find in them and
## slows them tenfold or more; their packages run a second time without it.
test: fmt-check vet
	$(GO) test -race -timeout 20m $(PKGS)
	$(GO) test -timeout 10m ./codec/... ./dynamic ./tablefilter/... ./cmd/lsmcuckoo/... ./bench/... ./kvdemo

## demo: the main job, end to end: kvdemo loads 1M keys into four stores
## (cuckoo, global, bloom, none) and compares point lookups (see README).
demo:
	$(GO) run ./kvdemo/cmd/kvdemo demo

## report-quick: the side-by-side benchmark report in about 2.5 minutes.
report-quick:
	$(GO) run ./bench -quick

## bench: the full side-by-side report into ./report (more than 15 minutes).
bench:
	$(GO) run ./bench -out report

## fuzz: a short coverage-guided run of every fuzz target.
fuzz:
	$(GO) test ./codec -run XXX -fuzz FuzzMayContain -fuzztime 30s
	$(GO) test ./codec -run XXX -fuzz FuzzDecode -fuzztime 30s
	$(GO) test ./codec -run XXX -fuzz FuzzBuildNoFalseNegatives -fuzztime 30s
	$(GO) test ./codec -run XXX -fuzz FuzzV2TrailerDamage -fuzztime 30s
	$(GO) test ./codec -run XXX -fuzz FuzzV3TrailerDamage -fuzztime 30s
	$(GO) test ./codec -run XXX -fuzz FuzzV3LineContents -fuzztime 30s
	$(GO) test ./codec -run XXX -fuzz FuzzV3BuildCraftedHashes -fuzztime 30s
	$(GO) test ./codec -run XXX -fuzz FuzzV4TrailerDamage -fuzztime 30s
	$(GO) test ./codec -run XXX -fuzz FuzzV4LineContents -fuzztime 30s
	$(GO) test ./codec/internal/linev4 -run XXX -fuzz FuzzMayContainKey64 -fuzztime 30s
	$(GO) test ./codec -run XXX -fuzz FuzzV4BuildCraftedHashes -fuzztime 30s
	$(GO) test ./codec -run XXX -fuzz FuzzBuildOptions -fuzztime 30s
	$(GO) test ./tablefilter -run XXX -fuzz FuzzPolicyFromName -fuzztime 30s
	$(GO) test ./kvdemo -run XXX -fuzz FuzzScanLog -fuzztime 30s
	$(GO) test ./kvdemo -run XXX -fuzz FuzzParseManifest -fuzztime 30s
	$(GO) test ./kvdemo -run XXX -fuzz FuzzFilterBinding -fuzztime 30s
	$(GO) test ./kvdemo/internal/resp -run XXX -fuzz FuzzReadCommand -fuzztime 30s
	$(GO) test ./kvdemo/internal/resp -run XXX -fuzz FuzzChunkedBulk -fuzztime 30s
	$(GO) test ./dynamic -run XXX -fuzz FuzzIndexHistory -fuzztime 30s
	$(GO) test ./bench/binaryfuse -run XXX -fuzz FuzzMayContain -fuzztime 30s

vet:
	$(GO) vet $(PKGS)
	# The assembly lookup is amd64 only: the other architectures' build and
	# tests must compile too.
	GOARCH=arm64 $(GO) vet $(PKGS)

fmt-check:
	@out=$$(gofmt -l .); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
