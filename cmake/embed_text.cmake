# Writes the file IN to OUT as one C++ raw string literal, byte for byte, so a source file
# (a device prelude, a shader header) is kept as a real file and compiled into the library:
#   cmake -DIN=<file> -DOUT=<file.inc> -P embed_text.cmake
# and in C++: const char* const text =
#   #include "file.inc"
#   ;
file(READ "${IN}" content)
string(FIND "${content}" ")ember_embed\"" clash)
if(NOT clash EQUAL -1)
  message(FATAL_ERROR "embed_text: ${IN} contains the raw-string delimiter )ember_embed\"")
endif()
file(WRITE "${OUT}" "R\"ember_embed(${content})ember_embed\"\n")
