# Writes OUTPUT, a header defining EMBER_BENCH_COMMIT: the short commit of SOURCE_DIR when
# the build ran, "-dirty" appended when tracked files differed from it, or "unknown"
# without git (GIT_EXECUTABLE empty) or outside a repository. benches/CMakeLists.txt runs
# this at every build; OUTPUT is rewritten only when its text changes, so an unchanged
# commit recompiles nothing and a new one recompiles only the file that includes it.
set(commit "unknown")
if(GIT_EXECUTABLE)
  execute_process(
    COMMAND "${GIT_EXECUTABLE}" -C "${SOURCE_DIR}" rev-parse --short HEAD
    OUTPUT_VARIABLE head
    RESULT_VARIABLE rc
    OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
  if(rc EQUAL 0 AND NOT head STREQUAL "")
    set(commit "${head}")
    # --no-optional-locks: a build must not hold the index lock that a concurrent git
    # command in the same checkout needs.
    execute_process(
      COMMAND "${GIT_EXECUTABLE}" --no-optional-locks -C "${SOURCE_DIR}" status --porcelain
              --untracked-files=no
      OUTPUT_VARIABLE changes
      RESULT_VARIABLE rc
      ERROR_QUIET)
    if(rc EQUAL 0 AND NOT changes STREQUAL "")
      string(APPEND commit "-dirty")
    endif()
  endif()
endif()
file(WRITE "${OUTPUT}.tmp"
     "// Generated at build time by benches/build_commit.cmake.\n"
     "#pragma once\n"
     "#define EMBER_BENCH_COMMIT \"${commit}\"\n")
file(COPY_FILE "${OUTPUT}.tmp" "${OUTPUT}" ONLY_IF_DIFFERENT)
file(REMOVE "${OUTPUT}.tmp")
