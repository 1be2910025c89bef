// The firmware board of ember's embedded tests and examples: QEMU's mps2-an386 (Cortex-M4)
// with semihosting. startup.cpp runs main and reports its return value as the process exit
// code of QEMU (SYS_EXIT_EXTENDED), so a firmware image is a ctest case.
#pragma once

namespace ember::board {

// Flushes stdout and ends the run with `code` as QEMU's exit status.
[[noreturn]] void exit(int code);

// Instructions executed so far, to 40: SysTick counts the core's 25 MHz clock in QEMU's
// virtual time, which under -icount shift=0 advances one nanosecond an instruction, so the
// count repeats run to run (semihosting's SYS_ELAPSED would count the host's time instead).
unsigned long long ticks();

}  // namespace ember::board
