// Reset and exit for QEMU's mps2-an386 (see board.hpp and mps2-an386.ld): the vector table,
// a reset handler that enables the FPU, copies .data, clears .bss, opens semihosting's
// standard streams and runs the static constructors and main, and fault handlers that say
// which fault it was and exit with a non-zero code.
#include "board.hpp"

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>

extern "C" {
extern std::uint32_t __data_start__, __data_end__, __data_load__, __bss_start__, __bss_end__;
extern std::uint32_t __stack_top__;
void initialise_monitor_handles();
void __libc_init_array();
// The application's main, called by its symbol (C++ does not let a program call main).
int application_main() asm("main");
// newlib's __libc_init_array calls _init (from crti.o, which -nostartfiles leaves out).
void _init() {}
void _fini() {}
// The handle of this image for __cxa_atexit (crtbegin.o's, also left out): one image, no
// shared objects.
void* __dso_handle = &__dso_handle;
// newlib's aligned_alloc calls posix_memalign, which this newlib does not provide.
void* memalign(std::size_t alignment, std::size_t bytes);
int posix_memalign(void** out, std::size_t alignment, std::size_t bytes) {
  void* p = memalign(alignment, bytes);
  if (p == nullptr) return 12;  // ENOMEM
  *out = p;
  return 0;
}
}

namespace {

constexpr std::uint32_t kSysExitExtended = 0x20;
constexpr std::uint32_t kAdpStoppedApplicationExit = 0x20026;

std::uint32_t semihost(std::uint32_t op, void* arg) {
  register std::uint32_t r0 asm("r0") = op;
  register void* r1 asm("r1") = arg;
  asm volatile("bkpt 0xab" : "+r"(r0) : "r"(r1) : "memory");
  return r0;
}

// SysTick (the Cortex-M core's 24-bit down-counter) on the processor clock, counting down
// from 2^24 - 1 and raising its exception at each wrap, which ticks() adds up.
struct SysTickRegs {
  volatile std::uint32_t ctrl, load, val, calib;
};
SysTickRegs& systick() { return *reinterpret_cast<SysTickRegs*>(0xE000E010); }
constexpr std::uint32_t kSysTickReload = 0xFFFFFF;
volatile std::uint32_t g_systick_wraps = 0;
// QEMU's mps2 boards clock the core at 25 MHz; under -icount shift=0 one instruction is one
// nanosecond of virtual time, so one clock tick is 40 instructions.
constexpr unsigned long long kInstructionsPerTick = 1'000'000'000ull / 25'000'000ull;

void start_systick() {
  systick().load = kSysTickReload;
  systick().val = 0;
  systick().ctrl = 0x7;  // enable, exception at wrap, processor clock
}

[[noreturn]] void fault(const char* what) {
  std::fprintf(stderr, "firmware: %s\n", what);
  ember::board::exit(70);
}

extern "C" [[noreturn]] void Reset_Handler() {
  // CP10 and CP11 (the FPU) full access, before any floating-point instruction.
  volatile std::uint32_t& cpacr = *reinterpret_cast<volatile std::uint32_t*>(0xE000ED88);
  cpacr = cpacr | (0xFu << 20);
  asm volatile("dsb\n isb" ::: "memory");
  std::memcpy(&__data_start__, &__data_load__,
              reinterpret_cast<char*>(&__data_end__) - reinterpret_cast<char*>(&__data_start__));
  std::memset(&__bss_start__, 0,
              reinterpret_cast<char*>(&__bss_end__) - reinterpret_cast<char*>(&__bss_start__));
  initialise_monitor_handles();
  start_systick();
  __libc_init_array();
  ember::board::exit(application_main());
}

extern "C" void NMI_Handler() { fault("NMI"); }
extern "C" void HardFault_Handler() { fault("hard fault"); }
extern "C" void MemManage_Handler() { fault("memory management fault"); }
extern "C" void BusFault_Handler() { fault("bus fault"); }
extern "C" void UsageFault_Handler() { fault("usage fault"); }
extern "C" void Default_Handler() { fault("unexpected interrupt"); }
extern "C" void SysTick_Handler() { g_systick_wraps = g_systick_wraps + 1; }

using Handler = void (*)();
}  // namespace

// The first 16 entries of the Cortex-M vector table (no device interrupts are used).
extern "C" __attribute__((section(".isr_vector"), used)) const Handler g_vectors[16] = {
    reinterpret_cast<Handler>(&__stack_top__),
    Reset_Handler,
    NMI_Handler,
    HardFault_Handler,
    MemManage_Handler,
    BusFault_Handler,
    UsageFault_Handler,
    nullptr,
    nullptr,
    nullptr,
    nullptr,
    Default_Handler,  // SVCall
    Default_Handler,  // DebugMonitor
    nullptr,
    Default_Handler,  // PendSV
    SysTick_Handler,
};

namespace ember::board {

void exit(int code) {
  std::fflush(stdout);
  std::fflush(stderr);
  std::uint32_t block[2] = {kAdpStoppedApplicationExit, static_cast<std::uint32_t>(code)};
  semihost(kSysExitExtended, block);
  for (;;) {
  }
}

unsigned long long ticks() {
  // Wraps, count, wraps again: a wrap between the reads (its exception taken) reads again.
  for (;;) {
    const std::uint32_t wraps = g_systick_wraps;
    const std::uint32_t val = systick().val;
    if (wraps == g_systick_wraps) {
      const unsigned long long elapsed =
          (static_cast<unsigned long long>(wraps) << 24) + (kSysTickReload - val);
      return elapsed * kInstructionsPerTick;
    }
  }
}

}  // namespace ember::board
