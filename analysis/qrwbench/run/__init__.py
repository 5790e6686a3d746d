"""The run stage: cells of the matrix booted as guests. It takes matrix cells
and built kernels, modules and initramfs images, boots each cell in QEMU
(``boot``: one boot, with ``qemu``, ``kvm``, ``pin``, ``perf``), saves each
boot's console, command and provenance in a run directory and imports it
into the store. ``bench`` is make bench's loop, with the stopping rule of
qrwbench.analysis.planner; it hands its boots to an executor (``executor``:
here; ``bench_remote`` with ``remote``: on other hosts). The other
subcommands that boot are here too: torture and its canaries, the emulator
audit, perf profiles, and the kernel-commit series and bisect (``ktree``:
private kernel trees built and booted commit by commit). It gives run
directories and stored runs; the stages after it never import it."""
