# The two commands of the README: `make run` and `make test`. Each sets up what a fresh
# Debian 12 machine lacks (apt packages, .venv), builds incrementally, then does its work.
VENV   := .venv
PY     := $(VENV)/bin/python
BUILD  := build
JOBS   ?= $(shell nproc)
LLVM   := /usr/lib/llvm-22

.PHONY: run test test-sanitize setup build install lit cpp-test py-test bench clean

run: install
	$(PY) -m torch_tile.demo

test: install
	@$(MAKE) --no-print-directory lit cpp-test py-test

setup:
	./scripts/setup-debian.sh
	./scripts/setup-venv.sh

$(BUILD)/build.ninja: | setup
	cmake -S . -B $(BUILD) -G Ninja -DCMAKE_BUILD_TYPE=Release -DPython3_EXECUTABLE=$(CURDIR)/$(PY) \
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

# The C++ (compiler, runtime, GoogleTests) built with AddressSanitizer and
# UndefinedBehaviorSanitizer in a folder of its own, its libraries kept there, then ctest.
# Without the torch binding: Python and libtorch are not instrumented.
SANITIZE_BUILD := build-sanitize
# LLVM, MLIR and lld are not instrumented, but their headers' BumpPtrAllocator poisons
# and unpoisons its slabs where the instrumented side inlines it: the uninstrumented side
# then reads memory that only the other believes poisoned. So the allocators' own
# poisoning (user poisoning) is off; every check of ASan and UBSan stays on.
SANITIZE_ENV := ASAN_OPTIONS=allow_user_poisoning=0 \
	UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1

test-sanitize: setup
	cmake -S . -B $(SANITIZE_BUILD) -G Ninja -DCMAKE_BUILD_TYPE=Release \
	  -DTILE_SANITIZE=ON -DTILE_BUILD_TORCH=OFF \
	  -DTILE_PACKAGE_LIB_DIR=$(CURDIR)/$(SANITIZE_BUILD)/lib
	cmake --build $(SANITIZE_BUILD) -j $(JOBS) --target tile_cpp_tests
	$(SANITIZE_ENV) ctest --test-dir $(SANITIZE_BUILD) --output-on-failure -j $(JOBS)

bench: install
	$(PY) benchmarks/bench_vector_add.py
	$(PY) benchmarks/bench_matmul.py

clean:
	rm -rf $(BUILD) python/torch_tile/lib
