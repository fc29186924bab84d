# The torchscript policy (plugins/policy/torchscript): the conformance suite checks a module the
# build scripts from docs/examples/python_policy (width 16, Python unmerge scores, a submodule),
# and tests/python/policy_test.sh scripts the example, refuses bad modules and trains it inside
# htm run (gradients, weights moving, kill and resume to the same bits, two ranks, check-plugin).
execute_process(COMMAND ${HTM_PYTHON} -c "import torch" RESULT_VARIABLE HTM_PYTHON_TORCH_MISSING
  OUTPUT_QUIET ERROR_QUIET)
set(HTM_PYTHON_POLICY ${PROJECT_SOURCE_DIR}/docs/examples/python_policy/bilinear_policy.py)
if(NOT HTM_PYTHON_TORCH_MISSING)
  add_custom_command(OUTPUT ${HTM_CONFORMANCE_TORCHSCRIPT}
    COMMAND ${CMAKE_COMMAND} -E make_directory ${CMAKE_BINARY_DIR}/test-modules
    COMMAND ${HTM_PYTHON} ${HTM_PYTHON_POLICY} --dim 16 --unmerge -o ${HTM_CONFORMANCE_TORCHSCRIPT}
    DEPENDS ${HTM_PYTHON_POLICY} COMMENT "Scripting the example Python policy for the conformance suite")
  add_custom_target(htm_conformance_module ALL DEPENDS ${HTM_CONFORMANCE_TORCHSCRIPT})
  add_dependencies(htm-conformance htm_conformance_module)
else()
  message(STATUS "${HTM_PYTHON} has no torch: the torchscript policy's tests skip (install python3-torch)")
endif()
add_test(NAME python.policy COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/policy_test.sh $<TARGET_FILE:htm>
  ${PROJECT_SOURCE_DIR} ${HTM_PYTHON})
set_tests_properties(python.policy PROPERTIES LABELS integration SKIP_RETURN_CODE 77 TIMEOUT 300
  PASS_REGULAR_EXPRESSION "python policy test passed")
