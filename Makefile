# qrwbench: what memory ordering costs in Linux's queued rwlocks and atomics.
#
#   make deps                      install the Debian packages (root)
#   make kernels                   every arch x variant kernel of the default matrix
#   make kernel ARCH=arm64 VARIANT=full
#   make bench [QUICK=1] [MATRIX=bench/matrix/x.toml] [ACCEL=kvm|tcg]
#   make report                    build/report/index.html from the results store
#   make audit                     what each variant compiles to (objdump)
#   make noise                     CV, A/A rates, MDE, drift (bench/matrix/validity.toml)
#   make perf CELL=...             perf record profile of QEMU for one cell
#   make test                      everything `make test` needs, then the tests
#   make test-slow                 + the unpatched reference build and its identity check
#
# The host side runs under Debian's /usr/bin/python3 (it sees Debian's numpy,
# scipy, matplotlib); the python3 first on PATH may be another install.

PY          ?= /usr/bin/python3
ARCHES      := $(filter-out base variant-%,$(basename $(notdir $(wildcard kernel/configs/*.config))))
VARIANTS    := full acqrel relaxed
ALL_VARIANTS := $(patsubst variant-%,%,$(basename $(notdir $(wildcard kernel/configs/variant-*.config))))
KERNELS     := $(foreach a,$(ARCHES),$(foreach v,$(VARIANTS),$(a)-$(v)))
# The kernels `make test` boots and disassembles (the relaxed ones are only
# configured there: their .config is checked, nothing boots them).
TEST_KERNELS := x86_64-acqrel x86_64-full arm64-acqrel arm64-full
RESULTS_DB  ?= results/qrwbench.sqlite
export RESULTS_DB PY

PYRUN := PYTHONPATH=$(CURDIR)/analysis $(PY)

.PHONY: all deps tree kernel kernels modules guests bench report audit regress perf perf-check noise \
	test test-slow test-kernels clean distclean help check-arch-variant torture insmod modprobe load

all: help

help:
	@sed -n '2,13p' Makefile | sed 's/^# \{0,1\}//'

deps:
	@kernel/scripts/deps.sh

tree: deps
	@kernel/scripts/prepare-tree.sh

check-arch-variant:
	@case " $(ARCHES) " in *" $(ARCH) "*) ;; *) echo "unknown ARCH '$(ARCH)': valid are $(ARCHES)" >&2; exit 1;; esac
	@case " $(ALL_VARIANTS) " in *" $(VARIANT) "*) ;; *) echo "unknown VARIANT '$(VARIANT)': valid are $(ALL_VARIANTS)" >&2; exit 1;; esac

# One kernel: make kernel ARCH=arm64 VARIANT=full
kernel: check-arch-variant tree
	@kernel/scripts/build-kernel.sh $(ARCH) $(VARIANT)

# Build a list of kernels with "n of m" progress: $(call build-kernels,list)
define build-kernels
	@n=0; m=$(words $(1)); for k in $(1); do n=$$((n+1)); \
	  QRWB_PROGRESS="$$n of $$m" kernel/scripts/build-kernel.sh $${k%%-*} $${k#*-} || exit 1; done
endef

kernels: tree
	$(call build-kernels,$(KERNELS))

test-kernels: tree
	$(call build-kernels,$(TEST_KERNELS))
	@for a in $(ARCHES); do kernel/scripts/build-kernel.sh $$a relaxed --config-only >/dev/null || exit 1; done

# Out-of-tree module and initramfs per kernel build.
define build-guests
	@n=0; m=$(words $(1)); for k in $(1); do n=$$((n+1)); \
	  QRWB_PROGRESS="$$n of $$m" bench/build-module.sh $${k%%-*} $${k#*-} || exit 1; \
	  guest/mkinitrd.sh $${k%%-*} $${k#*-} || exit 1; done
endef

guests: kernels
	$(call build-guests,$(KERNELS))

bench: guests
	@$(PYRUN) -m qrwbench.bench $(if $(QUICK),--quick) $(if $(MATRIX),--matrix $(MATRIX)) \
	  $(if $(ACCEL),--accel $(ACCEL)) --db $(RESULTS_DB)

report: deps
	@$(PYRUN) -m qrwbench report --db $(RESULTS_DB) --out build/report

audit: guests
	@$(PYRUN) -m qrwbench.audit --out build/audit

regress: deps
	@$(PYRUN) -m qrwbench regress --db $(RESULTS_DB) $(if $(BASE),--base $(BASE)) $(if $(THRESHOLD),--threshold $(THRESHOLD))

test: test-kernels
	$(call build-guests,$(TEST_KERNELS))
	@$(PY) -m pytest -m "not slow" $(PYTEST_ARGS)

test-slow: test-kernels
	$(call build-kernels,x86_64-unpatched arm64-unpatched)
	@$(PY) -m pytest -m slow $(PYTEST_ARGS)

# Keeps the results store (results/) and ccache; removes builds and runs.
clean:
	rm -rf build/kernels build/modules build/initrd build/runs build/report build/audit

distclean: clean
	rm -rf build

# Exclusion torture: make torture [MINUTES=3]
# The noise figures of docs/validity.md: the validity matrix into its own DB
# (the default results store is not touched), then qrwbench.noise on this
# rig commit's runs.
NOISE_DB ?= build/noise/noise.sqlite
noise: guests
	@$(PYRUN) -m qrwbench.bench --matrix bench/matrix/validity.toml --db $(NOISE_DB) --runs build/noise/runs
	@$(PYRUN) -m qrwbench.noise $(NOISE_DB) --commit $$(git rev-parse HEAD)

torture: guests
	@$(PYRUN) -m qrwbench.torture $(if $(MINUTES),--minutes $(MINUTES))

# A perf record profile of QEMU for one cell: make perf CELL=ARCH/ACCEL/CPU/VARIANT/WORKLOAD[:k=v,...]/VCPUS
# (builds that cell's kernel, module and initramfs first; output in build/perf/<cell>/).
perf-check:
	@$(if $(CELL),,echo "perf: error: give CELL=ARCH/ACCEL/CPU/VARIANT/WORKLOAD[:k=v,...]/VCPUS" >&2; exit 2;) \
	a=$(word 1,$(subst /, ,$(CELL))); v=$(word 4,$(subst /, ,$(CELL))); \
	case " $(ARCHES) " in *" $$a "*) ;; *) echo "perf: error: unknown arch '$$a' in CELL: valid are $(ARCHES)" >&2; exit 2;; esac; \
	case " $(ALL_VARIANTS) " in *" $$v "*) ;; *) echo "perf: error: unknown variant '$$v' in CELL: valid are $(ALL_VARIANTS)" >&2; exit 2;; esac

perf: perf-check tree
	@a=$(word 1,$(subst /, ,$(CELL))); v=$(word 4,$(subst /, ,$(CELL))); \
	kernel/scripts/build-kernel.sh $$a $$v && bench/build-module.sh $$a $$v && guest/mkinitrd.sh $$a $$v && \
	$(PYRUN) -m qrwbench.profile --cell '$(CELL)'

# The module is only ever loaded inside QEMU guests, never into the host.
insmod modprobe load:
	@echo "qrwbench never loads modules into the host kernel: the module runs only inside QEMU guests (make bench)" >&2; exit 1

# ---------------------------------------------------------------- regression tracking
# Kernel commits (README "Regression tracking"; CELL syntax
# ARCH/ACCEL/CPU/VARIANT/WORKLOAD[:k=v,...]/VCPUS):
#   make bench-series CELL=... [KERNEL_SRC=/path/to/linux] [FROM=qrwbench-base] [TO=HEAD] [BOOTS=5]
#   make bisect GOOD=<commit> BAD=<commit> CELL=... [KERNEL_SRC=/path/to/linux] [BOOTS=5] [THRESHOLD=5]
.PHONY: bench-series bisect

bench-series: $(if $(KERNEL_SRC),deps,tree)
	@$(if $(CELL),,echo "bench-series: error: give CELL=ARCH/ACCEL/CPU/VARIANT/WORKLOAD[:k=v,...]/VCPUS" >&2; exit 2;) \
	$(PYRUN) -m qrwbench.series --cell '$(CELL)' --db $(RESULTS_DB) $(if $(KERNEL_SRC),--kernel-src '$(KERNEL_SRC)') \
	  $(if $(FROM),--from '$(FROM)') $(if $(TO),--to '$(TO)') $(if $(BOOTS),--boots $(BOOTS)) \
	  $(if $(THRESHOLD),--threshold $(THRESHOLD))

bisect: $(if $(KERNEL_SRC),deps,tree)
	@$(if $(and $(GOOD),$(BAD),$(CELL)),,echo "bisect: error: give GOOD=<commit> BAD=<commit> CELL=ARCH/ACCEL/CPU/VARIANT/WORKLOAD[:k=v,...]/VCPUS" >&2; exit 2;) \
	$(PYRUN) -m qrwbench.bisect run --good '$(GOOD)' --bad '$(BAD)' --cell '$(CELL)' --db $(RESULTS_DB) \
	  $(if $(KERNEL_SRC),--kernel-src '$(KERNEL_SRC)') $(if $(BOOTS),--boots $(BOOTS)) \
	  $(if $(THRESHOLD),--threshold $(THRESHOLD))
