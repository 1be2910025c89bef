# ember_onnx_generate(<target> <model.onnx> [NAME <struct>] [NAMESPACE <ns>] [STEM <file>]
#                     [FORMAT ember|safetensors] [WEIGHTS_VAR <var>])
# Runs ember-onnx on the model at build time (again whenever the model or the tool changes)
# and adds the generated source to <target>: #include "<file>.hpp" (default: the model's
# stem) declares the struct <ns>::<struct>, whose load() reads the weights file written
# beside it; WEIGHTS_VAR names a variable set to that file's path.
function(ember_onnx_generate target model)
  cmake_parse_arguments(ARG "" "NAME;NAMESPACE;STEM;FORMAT;WEIGHTS_VAR" "" ${ARGN})
  get_filename_component(model_abs "${model}" ABSOLUTE)
  get_filename_component(stem "${model}" NAME_WE)
  if(ARG_STEM)
    set(stem "${ARG_STEM}")
  endif()
  set(format ember)
  if(ARG_FORMAT)
    set(format "${ARG_FORMAT}")
  endif()
  set(dir "${CMAKE_CURRENT_BINARY_DIR}/onnx_generated/${target}")
  set(args --out "${dir}" --stem "${stem}" --format "${format}")
  if(ARG_NAME)
    list(APPEND args --name "${ARG_NAME}")
  endif()
  if(ARG_NAMESPACE)
    list(APPEND args --namespace "${ARG_NAMESPACE}")
  endif()
  add_custom_command(
    OUTPUT "${dir}/${stem}.hpp" "${dir}/${stem}.cpp" "${dir}/${stem}.${format}"
    COMMAND "$<TARGET_FILE:ember::ember-onnx>" "${model_abs}" ${args}
    DEPENDS "${model_abs}" ember::ember-onnx
    COMMENT "ember-onnx ${model}"
    VERBATIM)
  target_sources(${target} PRIVATE "${dir}/${stem}.cpp")
  target_include_directories(${target} PRIVATE "${dir}")
  target_link_libraries(${target} PRIVATE ember::onnx)
  if(ARG_WEIGHTS_VAR)
    set(${ARG_WEIGHTS_VAR} "${dir}/${stem}.${format}" PARENT_SCOPE)
  endif()
endfunction()
