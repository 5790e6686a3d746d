"""The build stage, looked at without booting: what the built kernels and the
benchmark module compile to. It takes the builds the Makefile made (vmlinux,
qrwbench.ko under build/kernels and build/modules) and gives the ordering
audit (``audit``: per function and per timed loop, the instructions that
carry memory ordering, and which variants compile to identical code; the
disassembly in ``disasm``, the module's loops in ``module_audit``, what an
ordering promises in ``promise``), machine-code digests (``objdiff``: did a
commit change any executable byte), both read with a small ELF reader
(``elfmini``). Nothing here boots a guest or reads the results store."""
