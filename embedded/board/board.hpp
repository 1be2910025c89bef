// The firmware board of ember's embedded tests and examples: QEMU's mps2-an386 (Cortex-M4)
// with semihosting. startup.cpp runs main and reports its return value as the process exit
// code of QEMU (SYS_EXIT_EXTENDED), so a firmware image is a ctest case.
#pragma once

namespace ember::board {

// Flushes stdout and ends the run with `code` as QEMU's exit status.
[[noreturn]] void exit(int code);

// Ticks of the target's clock so far (semihosting's SYS_ELAPSED); with QEMU's -icount
// shift=0 a tick is one instruction, so counts repeat run to run. 0 where unavailable.
unsigned long long ticks();

}  // namespace ember::board
