// EMBER_PP_FOR_EACH(macro, a, b, c) expands to macro(a) macro(b) macro(c): the one piece
// of preprocessor machinery behind EMBER_MODULE and EMBER_CONFIG. It rescans through
// nested EMBER_PP_EXPAND levels (3^4 = 81 scans), so lists of up to 80 fields work.
#pragma once

#define EMBER_PP_PARENS ()
#define EMBER_PP_EXPAND(...) EMBER_PP_EXPAND4(EMBER_PP_EXPAND4(EMBER_PP_EXPAND4(__VA_ARGS__)))
#define EMBER_PP_EXPAND4(...) EMBER_PP_EXPAND3(EMBER_PP_EXPAND3(EMBER_PP_EXPAND3(__VA_ARGS__)))
#define EMBER_PP_EXPAND3(...) EMBER_PP_EXPAND2(EMBER_PP_EXPAND2(EMBER_PP_EXPAND2(__VA_ARGS__)))
#define EMBER_PP_EXPAND2(...) EMBER_PP_EXPAND1(EMBER_PP_EXPAND1(EMBER_PP_EXPAND1(__VA_ARGS__)))
#define EMBER_PP_EXPAND1(...) __VA_ARGS__

#define EMBER_PP_FOR_EACH(macro, ...) \
  __VA_OPT__(EMBER_PP_EXPAND(EMBER_PP_FOR_EACH_STEP(macro, __VA_ARGS__)))
#define EMBER_PP_FOR_EACH_STEP(macro, first, ...) \
  macro(first) __VA_OPT__(EMBER_PP_FOR_EACH_AGAIN EMBER_PP_PARENS(macro, __VA_ARGS__))
#define EMBER_PP_FOR_EACH_AGAIN() EMBER_PP_FOR_EACH_STEP
