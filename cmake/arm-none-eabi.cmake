# CMake toolchain for bare-metal Arm (Debian's gcc-arm-none-eabi, newlib and libstdc++ for
# newlib). The core flags pick the target; the default is a Cortex-M4F with hard float:
#   cmake -S embedded -B build-embedded -G Ninja --toolchain cmake/arm-none-eabi.cmake
# and EMBER_ARM_CPU_FLAGS="-mcpu=cortex-m7 -mthumb -mfloat-abi=hard -mfpu=fpv5-d16" for
# another core. See docs/embedded.md.
set(CMAKE_SYSTEM_NAME Generic)
set(CMAKE_SYSTEM_PROCESSOR arm)

set(CMAKE_C_COMPILER arm-none-eabi-gcc)
set(CMAKE_CXX_COMPILER arm-none-eabi-g++)
set(CMAKE_ASM_COMPILER arm-none-eabi-gcc)
find_program(EMBER_ARM_SIZE arm-none-eabi-size)
find_program(EMBER_ARM_OBJCOPY arm-none-eabi-objcopy)

# No operating system to link a test program against: try_compile builds a library.
set(CMAKE_TRY_COMPILE_TARGET_TYPE STATIC_LIBRARY)

set(EMBER_ARM_CPU_FLAGS "-mcpu=cortex-m4 -mthumb -mfloat-abi=hard -mfpu=fpv4-sp-d16"
    CACHE STRING "The Arm core, instruction set and floating-point ABI")
set(CMAKE_C_FLAGS_INIT "${EMBER_ARM_CPU_FLAGS}")
set(CMAKE_CXX_FLAGS_INIT "${EMBER_ARM_CPU_FLAGS}")
set(CMAKE_ASM_FLAGS_INIT "${EMBER_ARM_CPU_FLAGS}")
set(CMAKE_EXE_LINKER_FLAGS_INIT "${EMBER_ARM_CPU_FLAGS}")

set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
