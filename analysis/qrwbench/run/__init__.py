"""The run stage: cells of the matrix booted as guests. It takes matrix cells
and built kernels, modules and initramfs images, boots each cell in QEMU
(``qemu``, ``kvm``, ``pin``, ``perf``; other hosts: ``remote``,
``bench_remote``), saves each boot's console, command and provenance in a
run directory and imports it into the store (``bench``, with the stopping
rule of qrwbench.analysis.planner). The other subcommands that boot are here
too: torture and its canaries, the emulator audit, perf profiles, and the
kernel-commit series and bisect (``ktree``: private kernel trees built and
booted commit by commit). It gives run directories and stored runs; the
stages after it never import it."""
