# The torchscript plugins (plugins/policy/torchscript, plugins/merge/torchscript): the conformance
# suite checks modules the build scripts from docs/examples/python_policy (width 16: a policy with
# Python unmerge scores and a submodule, the residual MLP merge), TorchScriptRefusals.* the bad
# modules of bad_modules.py, and tests/python/policy_test.sh scripts the examples and trains them
# inside htm run (gradients, weights moving, kill and resume to the same bits, two ranks,
# check-plugin, a refusal as a user sees it).
execute_process(COMMAND ${HTM_PYTHON} -c "import torch" RESULT_VARIABLE HTM_PYTHON_TORCH_MISSING
  OUTPUT_QUIET ERROR_QUIET)
set(HTM_PYTHON_EXAMPLES ${PROJECT_SOURCE_DIR}/docs/examples/python_policy)
if(NOT HTM_PYTHON_TORCH_MISSING)
  add_custom_command(OUTPUT ${HTM_CONFORMANCE_MODULES}/policy.pt ${HTM_CONFORMANCE_MODULES}/merge.pt
    COMMAND ${CMAKE_COMMAND} -E make_directory ${HTM_CONFORMANCE_MODULES}
    COMMAND ${HTM_PYTHON} ${HTM_PYTHON_EXAMPLES}/bilinear_policy.py --dim 16 --unmerge -o ${HTM_CONFORMANCE_MODULES}/policy.pt
    COMMAND ${HTM_PYTHON} ${HTM_PYTHON_EXAMPLES}/mlp_merge.py --dim 16 -o ${HTM_CONFORMANCE_MODULES}/merge.pt
    COMMAND ${HTM_PYTHON} ${CMAKE_CURRENT_SOURCE_DIR}/bad_modules.py ${HTM_CONFORMANCE_MODULES}/bad
    DEPENDS ${HTM_PYTHON_EXAMPLES}/bilinear_policy.py ${HTM_PYTHON_EXAMPLES}/mlp_merge.py
      ${CMAKE_CURRENT_SOURCE_DIR}/bad_modules.py
    COMMENT "Scripting the example Python policy and merge operator, and bad modules, for the tests")
  add_custom_target(htm_conformance_modules ALL DEPENDS ${HTM_CONFORMANCE_MODULES}/policy.pt
    ${HTM_CONFORMANCE_MODULES}/merge.pt)
  add_dependencies(htm-conformance htm_conformance_modules)
  add_dependencies(htm_tests htm_conformance_modules)
else()
  message(STATUS "${HTM_PYTHON} has no torch: the torchscript plugins' tests skip (install python3-torch)")
endif()
add_test(NAME python.policy COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/policy_test.sh $<TARGET_FILE:htm>
  ${PROJECT_SOURCE_DIR} ${HTM_PYTHON})
set_tests_properties(python.policy PROPERTIES LABELS integration SKIP_RETURN_CODE 77 TIMEOUT 300
  PASS_REGULAR_EXPRESSION "python policy test passed")
