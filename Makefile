# Octet: the two commands.
#   make demo   install what is missing, build, run the bundled example end to end
#   make test   install what is missing, build, run every test (lit + GoogleTest via ctest)
#   make sanitize  the same suite on an ASan + UBSan build of Octet's code (build-asan/)
BUILD ?= build
JOBS ?= $(shell nproc 2>/dev/null || echo 2)
PY := .venv/bin/python

.PHONY: all deps configure build demo test sanitize fuzz clean

all: build

deps:
	@bash scripts/install-deps.sh

configure: deps
	@test -f $(BUILD)/build.ninja || cmake -S . -B $(BUILD) -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null

build: configure
	@cmake --build $(BUILD) -j $(JOBS)

demo: build
	@bash scripts/demo.sh $(BUILD)

test: build
	@cd $(BUILD) && ctest --output-on-failure -j $(JOBS)

sanitize: deps
	@bash scripts/sanitize.sh

fuzz: deps
	@bash scripts/fuzz.sh $(or $(SECONDS),600)

clean:
	rm -rf $(BUILD) build-fuzz build-asan
