# htm export's other formats read back from Python (issue 64): TensorBoard event files decoded by
# the standard library alone, weights by torch.load, with HTM_PYTHON (Debian's, where python3-torch
# lives); a test exits 77 (skipped, the reason printed) without what it needs. Also htm --version
# and the bash completion script.
foreach(t export_tensorboard export_weights)
  add_test(NAME python.${t} COMMAND ${HTM_PYTHON} ${CMAKE_CURRENT_SOURCE_DIR}/${t}.py
    $<TARGET_FILE:htm> ${PROJECT_SOURCE_DIR})
  set_tests_properties(python.${t} PROPERTIES LABELS integration TIMEOUT 120 SKIP_RETURN_CODE 77
    WORKING_DIRECTORY ${CMAKE_BINARY_DIR})
endforeach()

# htm --version: the version and the build's revision (cmake/build_revision.cmake).
add_test(NAME cli.version COMMAND $<TARGET_FILE:htm> --version)
set_tests_properties(cli.version PROPERTIES LABELS unit TIMEOUT 30
  PASS_REGULAR_EXPRESSION "^htm [0-9]+\\.[0-9]+\\.[0-9]+ \\(git revision ([0-9a-f]+(-dirty)?|unknown)\\)\n$")

# scripts/htm-completion.bash: commands, options, plugins after --set KIND.plugin=, variants.
add_test(NAME cli.completion COMMAND bash ${PROJECT_SOURCE_DIR}/tests/completion_test.sh $<TARGET_FILE:htm>
  ${PROJECT_SOURCE_DIR})
set_tests_properties(cli.completion PROPERTIES LABELS integration TIMEOUT 120
  PASS_REGULAR_EXPRESSION "completion test passed")
