# The two commands of the README: `make run` and `make test`. Each sets up what a fresh
# Debian 12 machine lacks (apt packages, .venv), builds incrementally, then does its work.
VENV   := .venv
PY     := $(VENV)/bin/python
BUILD  := build
JOBS   ?= $(shell nproc)
LLVM   := /usr/lib/llvm-22

.PHONY: run test setup build install lit cpp-test py-test bench clean

run: install
	$(PY) -m torch_tile.demo

test: install
	@$(MAKE) --no-print-directory lit cpp-test py-test

setup:
	./scripts/setup-debian.sh
	./scripts/setup-venv.sh

$(BUILD)/build.ninja: | setup
	cmake -S . -B $(BUILD) -G Ninja -DCMAKE_BUILD_TYPE=Release \
	  -DCMAKE_PREFIX_PATH="$$($(PY) -c 'import torch.utils; print(torch.utils.cmake_prefix_path)')"

build: setup $(BUILD)/build.ninja
	cmake --build $(BUILD) -j $(JOBS)

# Editable install: torch_tile imports from python/, where CMake puts the libraries. It is
# redone when the packaging changes: the metadata holds the torch_dynamo_backends entry point.
INSTALLED := $(VENV)/.torch_tile-installed

install: build $(INSTALLED)

$(INSTALLED): setup.py pyproject.toml | build
	$(PY) -m pip install -q --no-build-isolation --no-deps -e .
	touch $@

lit:
	$(VENV)/bin/lit -sv tests/lit

cpp-test:
	ctest --test-dir $(BUILD) --output-on-failure -j $(JOBS)

# pytest exits 5 when it collected nothing: that is a broken suite, not a pass.
py-test:
	@$(PY) -m pytest tests/python -q; rc=$$?; \
	  if [ $$rc -eq 5 ]; then echo "pytest collected no tests"; exit 1; fi; exit $$rc

bench: install
	$(PY) benchmarks/bench_vector_add.py
	$(PY) benchmarks/bench_matmul.py

clean:
	rm -rf $(BUILD) python/torch_tile/lib
