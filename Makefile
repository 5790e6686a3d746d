# qrwbench: what memory ordering costs in Linux's queued rwlocks and atomics.
#
#   make deps                      install the Debian packages (root)
#   make tree                      build/src/linux: linux-source-6.12 + kernel/patches as commits
#   make kernels                   every arch x variant kernel of the default matrix
#   make kernel ARCH=arm64 VARIANT=full
#   make guests                    module + initramfs for every kernel
#   make bench [QUICK=1] [MATRIX=bench/matrix/x.toml] [ACCEL=kvm|tcg] [HOSTS=a,b]
#   make report                    build/report/index.html from the results store
#   make regress [BASE=commit] [THRESHOLD=5]   0-day style report between rig commits
#   make audit                     what each variant compiles to (objdump), and what TCG runs for it,
#                                  and the per-arch ordering table (as make audit-arches)
#   make audit-arches              ordering instructions of the qrwlock fast paths and atomic
#                                  orderings on every qrwlock arch, from objects only (no kernel)
#   make noise                     CV, A/A rates, MDE, drift (bench/matrix/validity.toml)
#   make torture [MINUTES=3] [MATRIX=bench/matrix/torture-arches.toml]
#                                  rwlock exclusion checker on every variant + weak-memory canaries
#   make perf CELL=...             perf record profile of QEMU for one cell
#   make bench-series CELL=... [KERNEL_SRC=..] [FROM=..] [TO=..] [BOOTS=5]
#   make bisect GOOD=.. BAD=.. CELL=... [KERNEL_SRC=..] [BOOTS=5] [THRESHOLD=5]
#   make kvm-nested [ARCH=arm64|x86_64] [CELL=...]   the KVM path, booted inside a TCG
#                                  guest that is a KVM host (docs/kvm.md)
#   make test                      everything `make test` needs, then the tests
#   make check                     the host-only tests (no kernel, module or QEMU): minutes
#   make test-slow                 + the unpatched reference build and its identity check,
#                                  the KVM boots inside TCG guests (kvm-nested), and
#                                  ppc64le and riscv64 guests of every variant
#   make test-kernels              only the kernels `make test` boots (its first step)
#   make clean | distclean         remove builds and runs (results/ and ccache are kept) | all of build/
#   make help                      this text
#
# Every host-side step is a subcommand of one command line, the one these
# targets call: PYTHONPATH=analysis /usr/bin/python3 -m qrwbench <subcommand>
# (import, report, compare, regress, bench, audit, emuaudit, archaudit, noise,
# torture, perf, series, bisect; --help lists them). Bad input: one line
# `qrwbench: error: ...` and status 2.
#
# The host side runs under Debian's /usr/bin/python3 (it sees Debian's numpy,
# scipy, matplotlib); the python3 first on PATH may be another install.

PY          ?= /usr/bin/python3
# Every arch with a kernel fragment (make kernel ARCH=... builds any of them)
ARCHES      := $(filter-out base variant-%,$(basename $(notdir $(wildcard kernel/configs/*.config))))
# The arches of the default matrix, `make kernels` and `make test`: the two
# the rig boots. The others of ARCHES (ppc64le, riscv64) are built as
# kernels only on request, and as objects by make audit / audit-arches.
DEFAULT_ARCHES := x86_64 arm64
VARIANTS    := full acqrel relaxed
ALL_VARIANTS := $(patsubst variant-%,%,$(basename $(notdir $(wildcard kernel/configs/variant-*.config))))
KERNELS     := $(foreach a,$(DEFAULT_ARCHES),$(foreach v,$(VARIANTS),$(a)-$(v)))
# The per-arch ordering audit's object builds (build-kernel.sh --objects):
# every arch with a fragment, kernel/configs/ or kernel/configs/audit/
# (objects only: mips64el, sparc64), in each variant; allfull where the
# series offers CONFIG_ATOMICS_FULLY_ORDERED (kernel/patches/0003).
AUDIT_ARCHES := $(ARCHES) $(basename $(notdir $(wildcard kernel/configs/audit/*.config)))
# (the arches its fragment names: "# qrwbench-arches: ...")
ALLFULL_ARCHES := $(shell sed -n 's/^\# qrwbench-arches: *//p' kernel/configs/variant-allfull.config)
AUDIT_OBJECTS := $(foreach a,$(AUDIT_ARCHES),$(foreach v,$(VARIANTS),$(a)-$(v))) \
	$(foreach a,$(ALLFULL_ARCHES),$(a)-allfull)
# The arches that boot outside the default matrix (ppc64le, riscv64:
# bench/matrix/arches.toml) and their kernels, which make test-slow boots.
OTHER_ARCHES := $(filter-out $(DEFAULT_ARCHES),$(ARCHES))
OTHER_KERNELS := $(foreach a,$(OTHER_ARCHES),$(foreach v,$(VARIANTS),$(a)-$(v)))
OTHER_ACQREL := $(foreach a,$(OTHER_ARCHES),$(a)-acqrel)
# The kernels `make test` boots and disassembles (the relaxed ones are only
# configured there: their .config is checked, nothing boots them).
TEST_KERNELS := x86_64-acqrel x86_64-full arm64-acqrel arm64-full arm64-allfull
RESULTS_DB  ?= results/qrwbench.sqlite
export RESULTS_DB PY

PYRUN := PYTHONPATH=$(CURDIR)/analysis $(PY)

.PHONY: kvm-nested
.PHONY: all deps tree kernel kernels guests bench report audit audit-arches regress perf noise \
	test test-slow test-kernels check clean distclean help check-arch-variant torture insmod modprobe load

all: help

help:
	@sed -n '3,/^$$/p' Makefile | sed -n 's/^# \{0,1\}//p'

deps:
	@kernel/scripts/deps.sh

tree: deps
	@kernel/scripts/prepare-tree.sh

# One arch and one variant, each checked before anything is built.
check-arch-variant:
	@[ "$(words $(ARCH))" = 1 ] || { echo "kernel: error: ARCH='$(ARCH)' must be one arch: valid are $(ARCHES)" >&2; exit 2; }
	@[ "$(words $(VARIANT))" = 1 ] || { echo "kernel: error: VARIANT='$(VARIANT)' must be one variant: valid are $(ALL_VARIANTS)" >&2; exit 2; }
	@case " $(ARCHES) " in *" $(ARCH) "*) ;; *) echo "kernel: error: unknown ARCH '$(ARCH)': valid are $(ARCHES)" >&2; exit 2;; esac
	@case " $(ALL_VARIANTS) " in *" $(VARIANT) "*) ;; *) echo "kernel: error: unknown VARIANT '$(VARIANT)': valid are $(ALL_VARIANTS)" >&2; exit 2;; esac

# One kernel: make kernel ARCH=arm64 VARIANT=full
kernel: check-arch-variant
	@$(MAKE) --no-print-directory tree
	@kernel/scripts/build-kernel.sh $(ARCH) $(VARIANT)

# Build a list of kernels with "n of m" progress: $(call build-kernels,list)
build-kernels = @kernel/scripts/build-kernels.sh $(1)

kernels: tree
	$(call build-kernels,$(KERNELS))

test-kernels: tree
	$(call build-kernels,$(TEST_KERNELS))
	@for a in $(DEFAULT_ARCHES); do for v in relaxed allfull; do \
		kernel/scripts/build-kernel.sh $$a $$v --config-only >/dev/null || exit 1; done; done

# Out-of-tree module and initramfs per kernel build.
build-guests = @kernel/scripts/build-kernels.sh --guests $(1)

guests: kernels
	$(call build-guests,$(KERNELS))

# The user's values reach the commands through the environment, never
# pasted into a shell line.
export MATRIX MINUTES ACCEL CELL GOOD BAD KERNEL_SRC FROM TO BOOTS THRESHOLD BASE HOSTS
TORTURE_ARGS = $(if $(MINUTES),--minutes "$$MINUTES") $(if $(MATRIX),--matrix "$$MATRIX")
BENCH_ARGS = $(if $(QUICK),--quick) $(if $(MATRIX),--matrix "$$MATRIX") \
	$(if $(ACCEL),--accel "$$ACCEL") $(if $(HOSTS),--hosts "$$HOSTS") --db "$$RESULTS_DB"

# $(call plan-build-run,SUBCOMMAND ARGS): `qrwbench SUBCOMMAND --plan ARGS`
# checks the input and prints the kernels it boots; then only those kernels
# (and their guests) are built, and the subcommand runs.
plan-build-run = @kernels=$$($(PYRUN) -m qrwbench $(firstword $(1)) --plan $(wordlist 2,999,$(1))) \
	|| exit 2; \
	$(MAKE) --no-print-directory tree && \
	kernel/scripts/build-kernels.sh $$kernels && \
	kernel/scripts/build-kernels.sh --guests $$kernels && \
	$(PYRUN) -m qrwbench $(1)

# The matrix, the accelerator and the results DB are checked first; then only
# the kernels (and guests) the matrix boots are built.
bench:
	$(call plan-build-run,bench $(BENCH_ARGS))

report: deps
	@$(PYRUN) -m qrwbench report --db "$$RESULTS_DB" --out build/report --screenshot

# Objects for the per-arch audit, with "n of m" progress
build-objects = @kernel/scripts/build-kernels.sh --objects $(1)

# The emulator audit boots every bootable arch's acqrel kernel (its module
# holds every ordering): the other arches' are built here too.
audit: guests
	$(call build-kernels,$(OTHER_ACQREL))
	$(call build-guests,$(OTHER_ACQREL))
	$(call build-objects,$(AUDIT_OBJECTS))
	@$(PYRUN) -m qrwbench audit --out build/audit
	@$(PYRUN) -m qrwbench emuaudit --out build/emulator
	@$(PYRUN) -m qrwbench archaudit --out build/archaudit

audit-arches: tree
	$(call build-objects,$(AUDIT_OBJECTS))
	@$(PYRUN) -m qrwbench archaudit --out build/archaudit

regress: deps
	@$(PYRUN) -m qrwbench regress --db "$$RESULTS_DB" $(if $(BASE),--base "$$BASE") $(if $(THRESHOLD),--threshold "$$THRESHOLD")

test: test-kernels
	$(call build-guests,$(TEST_KERNELS))
	@QRWB_REQUIRE_BUILT=1 $(PY) -m pytest -m "not slow" $(PYTEST_ARGS)

# The host-only tests: no kernel tree, kernel, module or QEMU boot needed.
# --dist loadfile: each file on one worker, so a module-scoped fixture is
# built once, and no two workers write one fixed path at once (the browser
# test's build/test-report).
check: deps
	@$(PY) -m pytest -n $$(nproc) --dist loadfile -m "not slow and not guest and not kernel" $(PYTEST_ARGS)

test-slow: test-kernels
	$(call build-kernels,x86_64-unpatched arm64-unpatched)
	$(call build-objects,ppc64le-acqrel ppc64le-full riscv64-acqrel riscv64-full)
	$(call build-guests,arm64-acqrel x86_64-acqrel)
	$(call build-kernels,$(OTHER_KERNELS))
	$(call build-guests,$(OTHER_KERNELS))
	@guest/nested/build-l1.sh arm64 && guest/nested/build-l1.sh x86_64
	@QRWB_REQUIRE_BUILT=1 $(PY) -m pytest -m slow $(PYTEST_ARGS)

# Keeps the results store (results/) and ccache; removes builds and runs.
clean:
	rm -rf build/kernels build/modules build/initrd build/runs build/report build/audit \
		build/objects build/archaudit

distclean: clean
	rm -rf build

# Exclusion torture: make torture [MINUTES=3]
# The noise figures of docs/validity.md: the validity matrix into its own DB
# (the default results store is not touched), then qrwbench noise on this
# rig commit's runs.
NOISE_DB ?= build/noise/noise.sqlite
noise: guests
	@$(PYRUN) -m qrwbench bench --matrix bench/matrix/validity.toml --db $(NOISE_DB) --runs build/noise/runs
	@$(PYRUN) -m qrwbench noise $(NOISE_DB) --commit $$(git rev-parse HEAD)

# MATRIX: another torture matrix (bench/matrix/torture-arches.toml: ppc64le
# and riscv64); its kernels and guests are built first.
torture:
	$(call plan-build-run,torture $(TORTURE_ARGS))

# A perf record profile of QEMU for one cell: make perf CELL=ARCH/ACCEL/CPU/VARIANT/WORKLOAD[:k=v,...]/VCPUS
# (CELL is checked first; then that cell's kernel, module and initramfs are
# built; output in build/perf/<cell>/).
perf:
	@k=$$($(PYRUN) -m qrwbench perf --cell "$$CELL" --check) || exit 2; \
	$(MAKE) --no-print-directory tree && kernel/scripts/build-kernels.sh $$k && \
	kernel/scripts/build-kernels.sh --guests $$k && $(PYRUN) -m qrwbench perf --cell "$$CELL"

# KVM by nesting: make kvm-nested [ARCH=arm64|x86_64] [CELL=...]. ARCH and
# CELL are checked first; then the L2 kernels and guests the cells boot, L1's
# kernel and root (guest/nested/build-l1.sh), then the boots.
NESTED_ARCH = $(or $(ARCH),arm64)
export NESTED_ARCH
NESTED_ARGS = --arch "$$NESTED_ARCH" $(if $(CELL),--cell "$$CELL")
kvm-nested:
	@k=$$($(PYRUN) -m qrwbench kvm-nested $(NESTED_ARGS) --check) || exit 2; \
	$(MAKE) --no-print-directory tree && kernel/scripts/build-kernels.sh $$k && \
	kernel/scripts/build-kernels.sh --guests $$k && guest/nested/build-l1.sh "$$NESTED_ARCH" && \
	$(PYRUN) -m qrwbench kvm-nested $(NESTED_ARGS) --db "$$RESULTS_DB"

# The module is only ever loaded inside QEMU guests, never into the host.
insmod modprobe load:
	@echo "qrwbench never loads modules into the host kernel: the module runs only inside QEMU guests (make bench)" >&2; exit 1

# ---------------------------------------------------------------- regression tracking
# Kernel commits (docs/regression.md; CELL syntax
# ARCH/ACCEL/CPU/VARIANT/WORKLOAD[:k=v,...]/VCPUS):
#   make bench-series CELL=... [KERNEL_SRC=/path/to/linux] [FROM=qrwbench-base] [TO=HEAD] [BOOTS=5]
#   make bisect GOOD=<commit> BAD=<commit> CELL=... [KERNEL_SRC=/path/to/linux] [BOOTS=5] [THRESHOLD=5]
.PHONY: bench-series bisect

SERIES_ARGS = --cell "$$CELL" --db "$$RESULTS_DB" $(if $(KERNEL_SRC),--kernel-src "$$KERNEL_SRC") \
	$(if $(FROM),--from "$$FROM") $(if $(TO),--to "$$TO") $(if $(BOOTS),--boots "$$BOOTS") \
	$(if $(THRESHOLD),--threshold "$$THRESHOLD")
BISECT_ARGS = --good "$$GOOD" --bad "$$BAD" --cell "$$CELL" --db "$$RESULTS_DB" \
	$(if $(KERNEL_SRC),--kernel-src "$$KERNEL_SRC") $(if $(BOOTS),--boots "$$BOOTS") \
	$(if $(THRESHOLD),--threshold "$$THRESHOLD")

# CELL, BOOTS, THRESHOLD and KERNEL_SRC are checked before the tree is prepared.
bench-series:
	@$(if $(CELL),,echo "bench-series: error: give CELL=ARCH/ACCEL/CPU/VARIANT/WORKLOAD[:k=v,...]/VCPUS" >&2; exit 2;) \
	$(PYRUN) -m qrwbench series --check $(SERIES_ARGS) || exit 2; \
	$(MAKE) --no-print-directory $(if $(KERNEL_SRC),deps,tree) && $(PYRUN) -m qrwbench series $(SERIES_ARGS)

bisect:
	@$(if $(and $(GOOD),$(BAD),$(CELL)),,echo "bisect: error: give GOOD=<commit> BAD=<commit> CELL=ARCH/ACCEL/CPU/VARIANT/WORKLOAD[:k=v,...]/VCPUS" >&2; exit 2;) \
	$(PYRUN) -m qrwbench bisect run --check $(BISECT_ARGS) || exit 2; \
	$(MAKE) --no-print-directory $(if $(KERNEL_SRC),deps,tree) && $(PYRUN) -m qrwbench bisect run $(BISECT_ARGS)
