# Installs Octet into a scratch prefix, builds a consumer with find_package(Octet)
# and runs it. Invoked by ctest (package-consumer).
set(prefix ${OCTET_BINARY_DIR}/test/package/prefix)
set(build ${OCTET_BINARY_DIR}/test/package/build)
file(REMOVE_RECURSE ${prefix} ${build})
execute_process(COMMAND ${CMAKE_COMMAND} --install ${OCTET_BINARY_DIR} --prefix ${prefix}
                RESULT_VARIABLE rc OUTPUT_QUIET)
if(rc)
  message(FATAL_ERROR "install failed: ${rc}")
endif()
# A sanitizer build's libraries need the sanitizers' runtimes: the consumer is built with them too.
set(sanitize)
if(OCTET_SANITIZE)
  set(sanitize -DCMAKE_CXX_FLAGS=-fsanitize=${OCTET_SANITIZE} -DCMAKE_EXE_LINKER_FLAGS=-fsanitize=${OCTET_SANITIZE})
endif()
execute_process(COMMAND ${CMAKE_COMMAND} -S ${OCTET_SOURCE_DIR}/test/package/consumer -B ${build}
                        -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH=${prefix} ${sanitize}
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
if(rc)
  message(FATAL_ERROR "configuring the consumer failed:\n${out}")
endif()
execute_process(COMMAND ${CMAKE_COMMAND} --build ${build} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
if(rc)
  message(FATAL_ERROR "building the consumer failed:\n${out}")
endif()
execute_process(COMMAND ${build}/octet-consumer RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(rc OR NOT out MATCHES "linear candidates: 1")
  message(FATAL_ERROR "consumer failed (${rc}):\n${out}\n${err}")
endif()
message(STATUS "consumer ran the installed pass library:\n${out}")
# The installed tools start from the prefix alone (they find their libraries through RPATH) and
# compile and describe a model's training plan.
execute_process(COMMAND ${prefix}/bin/fp8-opt ${OCTET_SOURCE_DIR}/examples/gpt2-tiny.onnx --recipe te --train
                        -o ${build}/m.plan RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(rc)
  message(FATAL_ERROR "the installed fp8-opt failed (${rc}):\n${out}\n${err}")
endif()
execute_process(COMMAND ${prefix}/bin/fp8-run ${build}/m.plan --info RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(rc OR NOT out MATCHES "recipe 'te'")
  message(FATAL_ERROR "the installed fp8-run failed (${rc}):\n${out}\n${err}")
endif()
message(STATUS "the installed fp8-opt and fp8-run compiled and read a plan")
